'use strict';
// Loads the engine built by `ci.sh build` (wasm-bindgen --target nodejs output in ../pkg).

let wasm;
try {
  wasm = require('../pkg/lockgate_node.js');
} catch (err) {
  if (err && err.code === 'MODULE_NOT_FOUND' && /lockgate_node/.test(String(err.message))) {
    throw new Error(
      'lockgate: the WebAssembly engine is not built (bindings-node/pkg is missing); ' +
        'run `bindings-node/ci.sh build` (or `./run test`) first',
      { cause: err },
    );
  }
  throw err;
}

module.exports = wasm;
