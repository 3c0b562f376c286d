// `gatehouse plugin build` for a JavaScript policy: componentize-js (the
// version package.json pins) turns policy.js into a component of the
// gatehouse:plugin `policy` world.
//
//   node build-js.mjs <componentize-js entry> <policy.js> <wit dir> <out.wasm>
//
// WASI features the host does not grant are left out (http, fetch-event);
// stdio stays, so an uncaught error's one-line report reaches the host, and
// clocks and random stay for the engine itself.
import { writeFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';

const [entry, source, wit, out] = process.argv.slice(2);
const { componentize } = await import(pathToFileURL(entry).href);
const { component } = await componentize({
  sourcePath: source,
  witPath: wit,
  worldName: 'policy',
  disableFeatures: ['http', 'fetch-event'],
});
await writeFile(out, component);
