import { relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '..', '..');

/** The package's entry points, as package.json `exports` maps them: `.`, `./testing`, `./dashboard`. */
export const ENTRY_POINTS = ['lib/index.ts', 'lib/testing/index.ts', 'lib/dashboard/index.ts'];

/** A part of the public API without a TSDoc comment. */
export interface Undocumented {
  /** The exported name, or `Export.member` (`Export.member.nested` for an inline object type's member). */
  name: string;
  /** The declaring file, relative to `root`. */
  file: string;
  /** 1-based line of the declaration's name. */
  line: number;
}

/**
 * Every export of `entryPoints` (files relative to `root`) that has no TSDoc comment, and every
 * public member without one: properties, methods and accessors of exported classes, interfaces and
 * object type literals (also those nested in a member's type), a class's parameter properties,
 * enum members and the properties of an exported `const` object literal. Re-exports (`export {…}
 * from`, `export *`) are followed to the declaration. Private, protected and `#private` members
 * do not count, nor does what is tagged `@internal`, nor do constructors, index and call signatures (they have no name to document),
 * nor declarations outside `root` (re-exported from a dependency).
 *
 * A declaration is documented when a `/** … *\/` comment right before it has a description, or
 * a `@deprecated` tag with text; a parameter property also when its constructor's `@param` tag for
 * it has text. An overloaded function or method, or a get/set
 * pair, is documented when one of its declarations is.
 */
export function undocumentedApi(entryPoints: readonly string[] = ENTRY_POINTS, root: string = ROOT): Undocumented[] {
  const files = entryPoints.map((entry) => resolve(root, entry));
  const program = ts.createProgram({
    rootNames: files,
    options: {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.CommonJS,
      moduleResolution: ts.ModuleResolutionKind.Node10,
      experimentalDecorators: true,
      strict: true,
      skipLibCheck: true,
      noEmit: true,
      types: ['node'],
    },
  });
  const checker = program.getTypeChecker();
  const inProject = (node: ts.Node): boolean => {
    const file = node.getSourceFile().fileName;
    return !file.includes('/node_modules/') && !relative(root, file).startsWith('..');
  };

  const found = new Map<string, Undocumented>();
  const report = (name: string, nodes: readonly ts.Node[]): void => {
    const node = nodes[0];
    const at = ts.getNameOfDeclaration(node as ts.Declaration) ?? node;
    const source = node.getSourceFile();
    const file = relative(root, source.fileName).split('\\').join('/');
    const line = source.getLineAndCharacterOfPosition(at.getStart(source)).line + 1;
    const key = `${file}:${line}:${at.getStart(source)}`;
    if (!found.has(key)) found.set(key, { name, file, line });
  };

  /** Checks the named members of a declaration, grouped by name (overloads, get/set pairs). */
  const checkMembers = (owner: string, members: readonly ts.Node[]): void => {
    const byName = new Map<string, ts.Node[]>();
    for (const member of members) {
      const name = memberName(member);
      if (name === undefined || !isPublic(member) || isInternal(member)) continue;
      byName.set(name, [...(byName.get(name) ?? []), member]);
    }
    for (const [name, nodes] of byName) {
      const qualified = `${owner}.${name}`;
      if (!nodes.some(hasDoc)) report(qualified, nodes);
      for (const node of nodes) checkMembers(qualified, nestedMembers(node));
    }
  };

  for (const file of files) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`tsdoc-coverage: ${relative(root, file)} is not part of the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    if (!moduleSymbol) continue; // no exports at all
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const target = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const declarations = (target.declarations ?? []).filter(inProject);
      if (declarations.length === 0 || declarations.some(isInternal)) continue;
      if (!declarations.some(hasDoc)) report(exported.name, declarations);
      for (const declaration of declarations) checkMembers(exported.name, membersOf(declaration));
    }
  }
  return [...found.values()].sort((a, b) => a.file.localeCompare(b.file) || a.line - b.line || a.name.localeCompare(b.name));
}

/** One line per finding: `name (file:line)`. */
export function describeUndocumented(missing: readonly Undocumented[]): string {
  return missing.map(({ name, file, line }) => `${name} (${file}:${line})`).join('\n');
}

/** The members an exported declaration documents: its class, interface, type literal, enum or object literal members. */
function membersOf(node: ts.Node): readonly ts.Node[] {
  if (ts.isClassLike(node)) {
    const parameterProperties = node.members
      .filter(ts.isConstructorDeclaration)
      .flatMap((ctor) => ctor.parameters.filter((parameter) => ts.isParameterPropertyDeclaration(parameter, ctor)));
    return [...node.members, ...parameterProperties];
  }
  if (ts.isInterfaceDeclaration(node) || ts.isEnumDeclaration(node)) return node.members;
  if (ts.isTypeAliasDeclaration(node)) return typeLiteralMembers(node.type);
  if (ts.isVariableDeclaration(node) && node.initializer) {
    const literal = unwrapExpression(node.initializer);
    if (ts.isObjectLiteralExpression(literal)) return literal.properties;
  }
  return [];
}

/** The members of the object type literals a member's type is made of (`worker?: { … }`). */
function nestedMembers(node: ts.Node): readonly ts.Node[] {
  if ((ts.isPropertySignature(node) || ts.isPropertyDeclaration(node) || ts.isParameter(node)) && node.type) {
    return typeLiteralMembers(node.type);
  }
  if (ts.isPropertyAssignment(node)) {
    const literal = unwrapExpression(node.initializer);
    if (ts.isObjectLiteralExpression(literal)) return literal.properties;
  }
  return [];
}

/** Members of `{ … }` types, looking through unions, intersections and parentheses. */
function typeLiteralMembers(type: ts.TypeNode): readonly ts.Node[] {
  if (ts.isTypeLiteralNode(type)) return type.members;
  if (ts.isUnionTypeNode(type) || ts.isIntersectionTypeNode(type)) return type.types.flatMap(typeLiteralMembers);
  if (ts.isParenthesizedTypeNode(type)) return typeLiteralMembers(type.type);
  return [];
}

function unwrapExpression(expression: ts.Expression): ts.Expression {
  while (ts.isAsExpression(expression) || ts.isSatisfiesExpression(expression) || ts.isParenthesizedExpression(expression)) {
    expression = expression.expression;
  }
  return expression;
}

/** The name a member is documented under; undefined for what has none (constructors, index/call signatures, static blocks). */
function memberName(member: ts.Node): string | undefined {
  if (ts.isConstructorDeclaration(member) || ts.isClassStaticBlockDeclaration(member)) return undefined;
  const name = ts.getNameOfDeclaration(member as ts.Declaration);
  if (!name || ts.isPrivateIdentifier(name)) return undefined;
  if (ts.isIdentifier(name) || ts.isStringLiteral(name) || ts.isNumericLiteral(name)) return name.text;
  return name.getText(); // [computed]
}

/** Tagged `@internal`: public to TypeScript, not part of the API (TypeDoc leaves it out, `excludeInternal`). */
function isInternal(node: ts.Node): boolean {
  return ts.getJSDocTags(node).some((tag) => tag.tagName.text === 'internal');
}

function isPublic(member: ts.Node): boolean {
  const flags = ts.getCombinedModifierFlags(member as ts.Declaration);
  return (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) === 0;
}

/**
 * Whether a `/** … *\/` comment documents the node: it has a description, or a `@deprecated` tag
 * with text (a comment of `@throws` or `@returns` alone says what, not what for). For a parameter
 * property, its constructor's `@param` tag with text counts too.
 */
function hasDoc(node: ts.Node): boolean {
  return ts.getJSDocCommentsAndTags(node).some((doc) => {
    if (ts.isJSDoc(doc)) {
      return text(doc.comment) !== '' || (doc.tags ?? []).some((tag) => ts.isJSDocDeprecatedTag(tag) && text(tag.comment) !== '');
    }
    // A tag on its own: the parameter's `@param` from its function's comment.
    return ts.isJSDocParameterTag(doc) && text(doc.comment) !== '';
  });
}

function text(comment: string | ts.NodeArray<ts.JSDocComment> | undefined): string {
  return (ts.getTextOfJSDocComment(comment) ?? '').trim();
}
