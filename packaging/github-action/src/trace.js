// SPDX-License-Identifier: MIT
// On a miss (or a restore-keys hit extracted) the job works on plain directories: the main step starts `lazycache trace start PATH...`
// so that the post step's `save` lays out the files the job read first, as the learned layout of
// a mount (docs/writable.md, "Learned layout from a traced job"). fanotify needs root: as another
// user the tracer is started through `sudo -n` (hosted runners allow it) and gives its files to
// that user. Both steps point the CLI at one run directory of this job (LAZYCACHE_RUN_DIR), so
// the save finds the trace whoever started it. Tracing is an optimisation: no failure here fails
// the job or the save.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const core = require('./core');
const lc = require('./lazycache');

function traceEnv(state) {
  return state.traceRunDir ? { env: { ...process.env, LAZYCACHE_RUN_DIR: state.traceRunDir } } : undefined;
}

// Main step, when the post step will save the paths as plain directories.
function startTrace(cli, state) {
  if (!cli.has('trace')) return;
  const runDir = path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'lazycache-trace');
  fs.mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const args = ['trace', 'start', ...state.paths];
  const asRoot = typeof process.getuid !== 'function' || process.getuid() === 0;
  const r = asRoot
    ? cli.run(args, { env: { ...process.env, LAZYCACHE_RUN_DIR: runDir } })
    : lc.run('sudo', ['-n', 'env', `LAZYCACHE_RUN_DIR=${runDir}`, cli.bin, ...args]);
  if (r.status !== 0) {
    core.info(`Not tracing the job's reads (${asRoot ? `lazycache trace exit ${r.status}` : 'needs root or passwordless sudo'}): `
      + 'the saved entry will have no learned layout.');
    return;
  }
  state.traceRunDir = runDir;
}

// Post step, when it does not run the save that takes the trace over.
function discardTrace(cli, state) {
  if (state.traceRunDir) cli.run(['trace', 'stop', '--discard', ...state.paths], traceEnv(state));
}

module.exports = { startTrace, discardTrace, traceEnv };
