// Builds one JavaScript policy into a component with componentize-js, the
// version pinned beside it. Ferry's `scripts/build-policies` runs it, and
// so does `npm run build` in a policy made by `ferry policy new`. It must
// never download anything (no weval AOT, which fetches a binary).
//
//   node build.mjs <policy.js> <wit dir> <out.wasm>
import { componentize } from '@bytecodealliance/componentize-js';
import { writeFile } from 'node:fs/promises';

const [sourcePath, witPath, out] = process.argv.slice(2);
if (!out) {
  console.error('usage: node build.mjs <policy.js> <wit dir> <out.wasm>');
  process.exit(2);
}
const { component } = await componentize({
  sourcePath,
  witPath,
  worldName: 'migration-policy',
  // A policy reaches no network; Ferry's host links no wasi:http either.
  disableFeatures: ['http', 'fetch-event'],
});
await writeFile(out, component);
