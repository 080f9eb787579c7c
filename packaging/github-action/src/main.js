// SPDX-License-Identifier: MIT
// The action's main step: make sure lazycache is installed, then mount (or restore, or only look
// up) the cache entry for `key`, set actions/cache's outputs, and leave what the post step needs
// in the step state.
'use strict';

const fs = require('fs');
const core = require('./core');
const { readInputs, storeArgs, keyArgs } = require('./inputs');
const lc = require('./lazycache');
const { startTrace } = require('./trace');

// actions/cache's outputs: cache-hit is 'true' only for an exact key match, 'false' for a
// restore-keys match, and not set at all on a miss.
function setKeyOutputs(inputs, matchedKey) {
  if (matchedKey) core.setOutput('cache-hit', matchedKey === inputs.key ? 'true' : 'false');
  core.setOutput('cache-primary-key', inputs.key);
  core.setOutput('cache-matched-key', matchedKey);
}

// The matched key from the CLI's outputs ("" on a miss). The CLI prints cache-matched-key; an
// exact hit without it still counts through cache-hit=true.
function matchedKeyFrom(outputs, inputs) {
  if (outputs['cache-matched-key']) return outputs['cache-matched-key'];
  if (outputs['cache-hit'] === 'true') return inputs.key;
  return '';
}

async function ensureCli(inputs) {
  let bin = lc.findLazycache();
  if (!bin) {
    core.info('lazycache is not installed: installing the package');
    bin = await lc.installDeb(inputs.deb);
  }
  const cli = new lc.Cli(bin);
  core.info(`Using ${cli.version || 'lazycache'} (${bin})`);
  return cli;
}

// Chooses how to restore: `mount`, `extract`, or for `auto` whatever `lazycache doctor` says
// this machine can do. Returns { command, args, mode, reason }.
function plan(cli, inputs) {
  let fuseReason = '';
  if (inputs.mode !== 'extract' && cli.has('doctor')) {
    // Only FUSE here: the restore that follows reports a store problem itself.
    const quick = cli.hasOption('doctor', 'no-store-check') ? ['--no-store-check'] : [];
    const d = cli.run(['doctor', '--json', ...quick], { echo: false });
    try {
      const j = JSON.parse(d.stdout.trim().split('\n').pop());
      if (!j.fuse_usable) fuseReason = j.fuse_reason || 'FUSE is not usable';
    } catch {
      fuseReason = '';  // an older doctor: let restore --mode auto decide
    }
  }
  const common = [...storeArgs(inputs), ...keyArgs(inputs)];
  if (inputs.mode === 'mount' || (inputs.mode === 'auto' && !fuseReason && !cli.has('restore'))) {
    return { command: 'mount', args: ['mount', ...common, ...inputs.paths], mode: 'mount', reason: '' };
  }
  if (!cli.has('restore')) {
    throw new Error(`this lazycache (${cli.version}) has no restore command to extract with`
      + (fuseReason ? `, and FUSE cannot be used: ${fuseReason}` : ''));
  }
  const mode = inputs.mode === 'auto' && fuseReason ? 'extract' : inputs.mode;
  const args = ['restore'];
  if (cli.hasOption('restore', 'mode')) args.push('--mode', mode);
  if (cli.hasOption('restore', 'json')) args.push('--json');  // entry size, bytes fetched, time
  return { command: 'restore', args: [...args, ...common, ...inputs.paths], mode, reason: fuseReason };
}

async function main() {
  let inputs;
  try {
    inputs = readInputs();
  } catch (e) {
    core.setFailed(e.message);
    return;
  }
  if (inputs.enableCrossOsArchive) {
    core.notice('enableCrossOsArchive is accepted for compatibility with actions/cache and ignored: '
      + 'lazycache caches are Linux-only (FUSE).');
  }
  let cli;
  try {
    cli = await ensureCli(inputs);
  } catch (e) {
    core.setFailed(e.message);
    return;
  }
  const state = {
    key: inputs.key, paths: inputs.paths, storeArgs: storeArgs(inputs), keyArgs: keyArgs(inputs, { withRestoreKeys: false }),
    saveAlways: inputs.saveAlways, uploadChunkSize: inputs.uploadChunkSize, lookupOnly: inputs.lookupOnly,
    bin: cli.bin, matchedKey: '', mode: '', command: '', reason: '', mounted: [], mountMs: 0, fetched: null, ok: false,
  };
  const started = Date.now();
  let result;
  if (inputs.lookupOnly) {
    if (!cli.has('lookup')) {
      core.setFailed(`lookup-only needs the lookup command, which this lazycache (${cli.version}) does not have`);
      return;
    }
    result = cli.run(['lookup', ...storeArgs(inputs), ...keyArgs(inputs), '--', ...inputs.paths]);  // the paths: the entry's version
    state.mode = 'lookup';
    state.command = 'lookup';
  } else {
    let p;
    try {
      p = plan(cli, inputs);
    } catch (e) {
      core.setFailed(e.message);
      return;
    }
    if (p.reason) core.notice(`FUSE cannot be used here, so the cache is extracted instead of mounted: ${p.reason}`);
    for (const dir of inputs.paths) fs.mkdirSync(dir, { recursive: true });
    result = cli.run(p.args);
    state.mode = p.mode;
    state.command = p.command;
    state.reason = p.reason;
  }
  state.mountMs = Date.now() - started;
  // A miss is exit 3 (not found) for lookup/restore/mount; anything else non-zero is a failure.
  const missExit = result.status === 3;
  if (result.status !== 0 && !missExit) {
    // actions/cache turns restore failures into a warning and a miss; so do we, unless the
    // user asked to fail on a miss.
    const msg = `lazycache ${result.status === -1 ? `could not run: ${result.error}` : `${state.command} failed (exit ${result.status})`}`;
    if (inputs.failOnCacheMiss) {
      core.setFailed(`${msg}; failing as fail-on-cache-miss is set`);
      return;
    }
    core.warning(`${msg}; continuing as a cache miss`);
  }
  // Only a command that succeeded restored anything: on any other exit (a miss, a failed mount
  // or extract) the outputs say miss, whatever the CLI printed before it failed, so steps guarded
  // by cache-hit run and the post step saves.
  state.matchedKey = result.status === 0 ? matchedKeyFrom(result.outputs, inputs) : '';
  const mountPoints = lc.cacheMountPoints();
  state.mounted = inputs.paths.filter((p) => mountPoints.has(p));
  // What really happened, whatever was asked: nothing on a miss, else a mount if a path is one.
  if (state.mode !== 'lookup') {
    if (!state.matchedKey) state.mode = 'none';
    else state.mode = state.mounted.length > 0 ? 'mount' : 'extract';
  }
  // The CLI's own figures (restore/mount --json: docs/cli.md): what it fetched when it
  // extracted, the entry's size, how long the CLI took.
  const report = result.status === 0 ? lc.jsonLines(result.stdout).pop() : undefined;
  if (report) {
    if (report.mode === 'extract') state.fetched = report.bytes_fetched;
    if (report.entry_bytes) state.entryBytes = report.entry_bytes;
    state.cliMs = report.ms;
  }
  // The post step will `save` plain directories (a miss, or a restore-keys hit extracted): trace.
  if (state.matchedKey !== inputs.key && state.mode !== 'lookup' && state.mounted.length === 0) startTrace(cli, state);
  state.ok = true;
  core.saveState('lazycache', JSON.stringify(state));

  setKeyOutputs(inputs, state.matchedKey);
  core.setOutput('mount-time-ms', String(state.mountMs));
  core.setOutput('restore-mode', state.mode);
  if (state.fetched !== null) core.setOutput('bytes-fetched', String(state.fetched));

  if (!state.matchedKey) {
    if (inputs.failOnCacheMiss) {
      core.setFailed(`Failed to restore cache entry. Exiting as fail-on-cache-miss is set. Input key: ${inputs.key}`);
      return;
    }
    core.info(`Cache not found for input keys: ${[inputs.key, ...inputs.restoreKeys].join(', ')}`);
  } else if (inputs.lookupOnly) {
    core.info(`Cache found and can be restored from key: ${state.matchedKey}`);
  } else {
    core.info(`Cache ${state.mode === 'mount' ? 'mounted' : 'restored'} from key: ${state.matchedKey} in ${state.mountMs} ms`);
  }
}

module.exports = { main, plan, matchedKeyFrom };

if (require.main === module) {
  main().catch((e) => core.setFailed(e && e.stack ? e.stack : String(e)));
}
