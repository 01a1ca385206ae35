import { BadRequestException, Controller, Get, NotFoundException, Param, Query, UseGuards, UseInterceptors } from '@nestjs/common';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardSameSiteGuard } from './dashboard-action.guard';
import { DashboardInterceptor } from './dashboard.interceptor';
import { PathSegmentPipe } from './dashboard.segments';
import { DashboardReader, GROUP_FILTERS, isGroupFilter, queryInt } from './dashboard.reader';

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

  /** Busiest first; `only=rate-held|paused` and `q` (a part of the group's name) filter them. */
  @Get('workflows/:name/groups')
  groups(@Param('name', PathSegmentPipe) name: string, @Query('offset') offset: Text, @Query('only') only: Text, @Query('q') q: Text) {
    if (only !== undefined && only !== '' && !isGroupFilter(only))
      throw new BadRequestException(`only must be one of ${GROUP_FILTERS.join(', ')}`);
    if (q !== undefined && (typeof q !== 'string' || q.length > 200))
      throw new BadRequestException('q must be a text of at most 200 characters');
    return this.reader.groups(name, queryInt(offset, 'offset', 0, 1000, 0), { only: only || undefined, q: q || undefined });
  }

  /**
   * A page of one workflow's runs in one state or in all (`state=all`), newest first unless
   * `order=asc`, only a `group`'s or a dedupe key's (`dedupe`) if given; or `id`: that run, whatever
   * its workflow; or `eventId`: the runs that event started, or `event`: those the newest events of
   * that name started (any workflow); or `batch`: the members of that batch run.
   */
  @Get('runs')
  runs(@Query() query: Record<string, Text>) {
    const { workflow, state, group, dedupe, cursor, limit, order, id, event, eventId, batch } = query;
    if (order !== undefined && order !== 'asc' && order !== 'desc') throw new BadRequestException("order must be 'asc' or 'desc'");
    return this.reader.runs({
      workflow: workflow ?? '',
      state: state || 'all',
      group: group || undefined,
      dedupeKey: dedupe || undefined,
      cursor: cursor || undefined,
      limit: queryInt(limit, 'limit', 1, 200, 50),
      order: order ?? 'desc',
      ...(id && { id }),
      ...(event && { event }),
      ...(eventId && { eventId }),
      ...(batch && { batch }),
    });
  }

  @Get('runs/:id')
  async run(@Param('id', PathSegmentPipe) id: string) {
    const found = await this.reader.run(id);
    if (!found) throw new NotFoundException(`No run ${id} (it never existed, or its retention expired)`);
    return found;
  }

  /** A page of schedules, only `workflow`'s if given. */
  @Get('schedules')
  schedules(@Query('cursor') cursor: Text, @Query('workflow') workflow: Text) {
    return this.reader.schedules(cursor || undefined, workflow || undefined);
  }
}
