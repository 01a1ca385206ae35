import { Body, Controller, HttpCode, Param, Post, UseGuards, UseInterceptors } from '@nestjs/common';
import { DashboardAccessGuard } from './dashboard-access.guard';
import { DashboardActionGuard } from './dashboard-action.guard';
import { DashboardActions } from './dashboard.actions';
import { DashboardInterceptor } from './dashboard.interceptor';
import { PathSegmentPipe } from './dashboard.segments';

/** The actions, refused unless enabled and unless sent by the dashboard's own page (see DashboardActionGuard). */
@Controller('api')
@UseGuards(DashboardAccessGuard, DashboardActionGuard)
@UseInterceptors(DashboardInterceptor)
export class DashboardActionsController {
  constructor(private readonly actions: DashboardActions) {}

  @Post('runs/:id/retry')
  @HttpCode(200)
  retry(@Param('id', PathSegmentPipe) id: string) {
    return this.actions.retry(id);
  }

  @Post('runs/:id/cancel')
  @HttpCode(200)
  cancel(@Param('id', PathSegmentPipe) id: string) {
    return this.actions.cancel(id);
  }

  @Post('runs/:id/remove')
  @HttpCode(200)
  remove(@Param('id', PathSegmentPipe) id: string) {
    return this.actions.remove(id);
  }

  @Post('workflows/:name/retry-failed')
  @HttpCode(200)
  retryFailed(@Param('name', PathSegmentPipe) name: string, @Body() body: unknown) {
    return this.actions.retryFailed(name, body);
  }

  @Post('workflows/:name/pause')
  @HttpCode(200)
  pause(@Param('name', PathSegmentPipe) name: string, @Body() body: unknown) {
    return this.actions.pause(name, body, true);
  }

  @Post('workflows/:name/resume')
  @HttpCode(200)
  resume(@Param('name', PathSegmentPipe) name: string, @Body() body: unknown) {
    return this.actions.pause(name, body, false);
  }

  @Post('workflows/:name/limits')
  @HttpCode(200)
  limits(@Param('name', PathSegmentPipe) name: string, @Body() body: unknown) {
    return this.actions.limits(name, body);
  }

  @Post('schedules/:id/pause')
  @HttpCode(200)
  pauseSchedule(@Param('id', PathSegmentPipe) id: string) {
    return this.actions.schedule(id, true);
  }

  @Post('schedules/:id/resume')
  @HttpCode(200)
  resumeSchedule(@Param('id', PathSegmentPipe) id: string) {
    return this.actions.schedule(id, false);
  }
}
