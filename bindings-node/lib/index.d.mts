// Types of the ES module entry (lib/index.mjs): the same declarations as lib/index.d.ts, plus
// the default export (the whole module, as `require('lockgate')` gives it).
export * from './index.js';
import * as lockgate from './index.js';
export default lockgate;
