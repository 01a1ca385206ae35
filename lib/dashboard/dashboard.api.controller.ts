import { BadRequestException, Controller, Get, NotFoundException, Param, Query, UseGuards, UseInterceptors } from '@nestjs/common';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardSameSiteGuard } from './dashboard-action.guard';
import { DashboardInterceptor } from './dashboard.interceptor';
import { PathSegmentPipe } from './dashboard.segments';
import { DashboardReader, queryInt } from './dashboard.reader';

type Text = string | undefined;

/** The JSON the page reads (see lib/dashboard/assets/dashboard.js). */
@Controller('api')
@UseGuards(DashboardAccessGuard, DashboardSameSiteGuard)
@UseInterceptors(DashboardInterceptor)
export class DashboardApiController {
  constructor(private readonly reader: DashboardReader) {}

  @Get('overview')
  overview() {
    return this.reader.overview();
  }

  @Get('workflows/:name/groups')
  groups(@Param('name', PathSegmentPipe) name: string, @Query('offset') offset: Text) {
    return this.reader.groups(name, queryInt(offset, 'offset', 0, 1000, 0));
  }

  /**
   * A page of one workflow's runs in one state or in all (`state=all`), newest first unless
   * `order=asc`; or `id`: that run, whatever its workflow; or `batch`: the members of that batch run.
   */
  @Get('runs')
  runs(@Query() query: Record<string, Text>) {
    const { workflow, state, group, cursor, limit, order, id, batch } = query;
    if (order !== undefined && order !== 'asc' && order !== 'desc') throw new BadRequestException("order must be 'asc' or 'desc'");
    return this.reader.runs({
      workflow: workflow ?? '',
      state: state || 'all',
      group: group || undefined,
      cursor: cursor || undefined,
      limit: queryInt(limit, 'limit', 1, 200, 50),
      order: order ?? 'desc',
      ...(id && { id }),
      ...(batch && { batch }),
    });
  }

  @Get('runs/:id')
  async run(@Param('id', PathSegmentPipe) id: string) {
    const found = await this.reader.run(id);
    if (!found) throw new NotFoundException(`No run ${id} (it never existed, or its retention expired)`);
    return found;
  }

  @Get('schedules')
  schedules(@Query('cursor') cursor: Text) {
    return this.reader.schedules(cursor || undefined);
  }
}
