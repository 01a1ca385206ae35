import { Controller, Get, NotFoundException, Param, Query, UseGuards, UseInterceptors } from '@nestjs/common';
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

  @Get('runs')
  runs(@Query('workflow') workflow: Text, @Query('state') state: Text, @Query('group') group: Text, @Query('cursor') cursor: Text, @Query('limit') limit: Text) {
    return this.reader.runs({ workflow: workflow ?? '', state: state ?? '', group: group || undefined, cursor: cursor || undefined, limit: queryInt(limit, 'limit', 1, 200, 50) });
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
