import type { FactoryProvider, InjectionToken, Type } from '@nestjs/common';
import { OPTIONAL_DEPS_METADATA, PARAMTYPES_METADATA, SELF_DECLARED_DEPS_METADATA } from '@nestjs/common/constants';

/**
 * Registers a class as a factory provider, with the dependencies its constructor declares (its
 * parameter types and `@Inject` tokens, read once here, when the module is defined).
 *
 * Why: Nest scans every class provider of every app it creates for guards, interceptors, filters,
 * pipes and route parameters, method by method, on each method of the prototype chain. Sluice's
 * own services have none of these (they are not controllers), yet that scan was a fifth of the
 * module's share of a bootstrap (measured: createApplicationContext 1.32 → 1.05 ms median without
 * it). A factory provider is not scanned; it is injected, instantiated and given its lifecycle
 * hooks like any other, under the same token.
 */
export function builtProvider<T>(type: Type<T>): FactoryProvider<T> {
  const paramTypes: unknown[] = [...((Reflect.getMetadata(PARAMTYPES_METADATA, type) as unknown[] | undefined) ?? [])];
  const declared = (Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, type) as Array<{ index: number; param: unknown }> | undefined) ?? [];
  for (const { index, param } of declared) paramTypes[index] = param;
  if (((Reflect.getMetadata(OPTIONAL_DEPS_METADATA, type) as unknown[] | undefined) ?? []).length > 0) {
    throw new Error(`${type.name}: @Optional() dependencies are not supported by builtProvider`);
  }
  paramTypes.forEach((token, index) => {
    // Undefined or Object: a circular import or an interface without @Inject; Nest would fail later, less clearly.
    if (token === undefined || token === Object) throw new Error(`${type.name}: constructor parameter ${index} has no injection token`);
  });
  return {
    provide: type,
    useFactory: (...args: unknown[]) => new (type as new (...deps: unknown[]) => T)(...args),
    inject: paramTypes as InjectionToken[],
  };
}
