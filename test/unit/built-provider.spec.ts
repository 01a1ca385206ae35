import 'reflect-metadata';
import { Inject, Injectable, Optional } from '@nestjs/common';
import { builtProvider } from '../../lib/util/built.provider';

const TOKEN = Symbol('TOKEN');

@Injectable()
class Dependency {}

@Injectable()
class Service {
  constructor(
    readonly dependency: Dependency,
    @Inject(TOKEN) readonly value: string,
  ) {}
}

interface Shape {
  x: number;
}

@Injectable()
class Untyped {
  constructor(readonly shape: Shape) {}
}

@Injectable()
class WithOptional {
  constructor(@Optional() readonly dependency: Dependency) {}
}

describe('builtProvider', () => {
  it('injects what the constructor declares, @Inject tokens in their places', () => {
    const provider = builtProvider(Service);
    expect(provider.provide).toBe(Service);
    expect(provider.inject).toEqual([Dependency, TOKEN]);
    const dependency = new Dependency();
    const built = provider.useFactory(dependency, 'v') as Service;
    expect(built).toBeInstanceOf(Service);
    expect(built.dependency).toBe(dependency);
    expect(built.value).toBe('v');
  });

  it('refuses a parameter with no injection token rather than injecting undefined', () => {
    expect(() => builtProvider(Untyped)).toThrow('Untyped: constructor parameter 0 has no injection token');
  });

  it('refuses @Optional() dependencies, which a plain inject list would make required', () => {
    expect(() => builtProvider(WithOptional)).toThrow('@Optional()');
  });
});
