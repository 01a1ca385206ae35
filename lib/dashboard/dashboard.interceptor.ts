import {
  BadRequestException,
  type CallHandler,
  ConflictException,
  type ExecutionContext,
  HttpException,
  Injectable,
  type NestInterceptor,
  NotFoundException,
  ServiceUnavailableException,
} from '@nestjs/common';
import { catchError, type Observable, throwError } from 'rxjs';
import {
  InvalidInputError,
  RedisConnectionError,
  RunNotFoundError,
  RunStateError,
  ScheduleConflictError,
  ScheduleNotFoundError,
  SignalMailboxFullError,
  UnknownWorkflowError,
} from '../errors';
import { SECURITY_HEADERS, setHeader } from './dashboard.headers';

/**
 * Sets {@link SECURITY_HEADERS} and answers Sluice's typed errors with the HTTP status they mean
 * (bad input 400, unknown run or workflow 404, a run in the wrong state 409, Redis away 503), the
 * message as `{ message }`.
 */
@Injectable()
export class DashboardInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const response = context.switchToHttp().getResponse<unknown>();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) setHeader(response, name, value);
    return next.handle().pipe(catchError((error: unknown) => throwError(() => toHttp(error))));
  }
}

function toHttp(error: unknown): unknown {
  if (error instanceof HttpException || !(error instanceof Error)) return error;
  if (error instanceof UnknownWorkflowError || error instanceof RunNotFoundError || error instanceof ScheduleNotFoundError)
    return new NotFoundException(error.message);
  if (error instanceof InvalidInputError) return new BadRequestException(error.message);
  if (error instanceof RunStateError || error instanceof ScheduleConflictError || error instanceof SignalMailboxFullError)
    return new ConflictException(error.message);
  if (error instanceof RedisConnectionError) return new ServiceUnavailableException(error.message);
  return error;
}
