// SPDX-License-Identifier: MIT
// The action's post step (runs: post-if: always()): unmount what the main step mounted, save the
// cache under the primary key when it missed or changed, and write the job summary. It runs even
// when the job failed so that no FUSE mount outlives the job; it saves on a failed job only with
// save-always. Save problems are warnings, never a failed job (actions/cache's rule).
'use strict';

const core = require('./core');
const lc = require('./lazycache');
const { discardTrace, traceEnv } = require('./trace');

function saveArgs(cli, state) {
  const args = ['save', ...state.storeArgs, ...state.keyArgs];
  // upload-chunk-size is a hint: the CLI's part size when it has one and the value is legal (S3's
  // 5 MiB minimum part).
  if (state.uploadChunkSize) {
    if (state.uploadChunkSize >= 5 * 1024 * 1024 && cli.hasOption('save', 'part-size')) {
      args.push('--part-size', String(state.uploadChunkSize));
    } else {
      core.info(`upload-chunk-size ${state.uploadChunkSize} is below S3's 5 MiB part minimum or not supported; using the default`);
    }
  }
  if (cli.hasOption('save', 'json')) args.push('--json');  // bytes uploaded, time
  return [...args, ...state.paths];
}

// Returns { ok, figures, stdout } for `unmount` of the mounted paths.
function unmount(cli, state, withSave) {
  const args = ['unmount'];
  if (withSave) {
    args.push('--save');
    if (cli.hasOption('unmount', 'key')) args.push(...state.storeArgs, ...state.keyArgs);
  }
  if (cli.hasOption('unmount', 'json')) args.push('--json');
  let r = cli.run([...args, ...state.mounted]);
  if (r.status !== 0 && cli.hasOption('unmount', 'lazy') && !withSave) {
    core.warning(`unmount failed (exit ${r.status}); detaching lazily so the job can end`);
    r = cli.run(['unmount', '--lazy', ...state.mounted]);
  }
  return { ok: r.status === 0, figures: lc.sumJsonFigures(r.stdout), r };
}

// Rows from the CLI's figures: `unmount --json` stats for a mount (docs/cli.md: store_bytes is
// what the job fetched, archive_bytes the entry's size), restore --json's for an extract.
function figureRows(figures, state) {
  const rows = [];
  const entry = figures.archive_bytes || state.entryBytes;
  const fetched = figures.store_bytes ?? state.fetched;
  if (entry) rows.push(['Entry size', lc.formatBytes(entry)]);
  if (fetched !== undefined && fetched !== null) {
    const share = entry ? ` of ${lc.formatBytes(entry)} (${((100 * fetched) / entry).toFixed(1)}%)` : '';
    rows.push(['Bytes fetched', `${lc.formatBytes(fetched)}${share}`]);
  }
  const frames = ['frames_from_store', 'frames_from_chunk_cache', 'frames_from_memory'].map((k) => figures[k]);
  if (frames.every((v) => v !== undefined)) {
    rows.push(['Frames', `${frames[0]} from the store, ${frames[1]} chunk cache, ${frames[2]} memory`]);
  }
  if (figures.files_opened !== undefined) rows.push(['Files opened', String(figures.files_opened)]);
  if (figures.read_errors) rows.push(['Read errors', String(figures.read_errors)]);
  if (figures.uptime_seconds !== undefined) rows.push(['Mounted for', `${figures.uptime_seconds.toFixed(1)} s`]);
  return rows;
}

// `save`: 'auto' (the main action's post step: save on a miss or a partial hit of a job that
// succeeded, or with save-always), 'always' (the save sub-action: the user's `if:` decides; an
// unchanged exact hit is still skipped by the CLI, entries being immutable) or 'never' (the
// restore sub-action's post step: only unmount what the save step did not). `given`: the state
// to use instead of the main step's (the save sub-action builds its own).
async function post({ save = 'auto', given = null } = {}) {
  const raw = given ? '' : core.getState('lazycache');
  if (!given && !raw) {
    core.info('Nothing to do: the main step did not get as far as restoring.');
    return;
  }
  const state = given || JSON.parse(raw);
  if (save === 'never') {
    // A trace the restore step started and no save step took over (skipped, failed job): it
    // must not outlive the job.
    discardTrace(new lc.Cli(state.bin), state);
    const mountPoints = lc.cacheMountPoints();
    state.mounted = state.mounted.filter((p) => mountPoints.has(p));
    if (state.mounted.length === 0) {
      core.info('Nothing to unmount: no restored path is still mounted (a save step unmounted them).');
      return;
    }
  }
  const cli = new lc.Cli(state.bin);
  const jobStatus = (core.getInput('job-status') || 'success').toLowerCase();
  const exactHit = state.matchedKey !== '' && state.matchedKey === state.key;
  const jobOk = jobStatus === 'success';
  const wantSave = save === 'always' || (save === 'auto' && !exactHit && (jobOk || state.saveAlways));
  // The save step knows no restore: its summary starts with the key.
  const rows = given ? [['Primary key', state.key]] : [
    ['Primary key', state.key],
    ['Matched key', state.matchedKey || '(miss)'],
    ['Cache hit', exactHit ? 'exact' : state.matchedKey ? 'partial (restore-keys)' : 'miss'],
    ['Restore', state.mode === 'extract' && state.reason ? `extract (FUSE unusable: ${state.reason})` : state.mode],
    [state.mode === 'mount' ? 'Mount time' : 'Restore time', `${state.mountMs} ms`
      + (state.cliMs !== undefined ? ` (lazycache: ${state.cliMs} ms)` : '')],
  ];
  let saved = '';
  let figures = {};
  const uploadRows = [];

  if (state.mounted.length > 0) {
    const canSaveOnUnmount = cli.hasOption('unmount', 'save');
    if (wantSave && canSaveOnUnmount) {
      const t = Date.now();
      const u = unmount(cli, state, true);
      figures = u.figures;
      saved = u.ok ? `unmount --save (${Date.now() - t} ms)` : 'failed (see log)';
      if (!u.ok) {
        core.warning(`unmount --save failed (exit ${u.r.status}); the cache was not saved`);
        // Whatever went wrong with the save, the mount must not outlive the job.
        const plain = unmount(cli, state, false);
        if (!plain.ok) core.warning(`unmount of ${state.mounted.join(', ')} failed too (exit ${plain.r.status})`);
      }
    } else {
      const u = unmount(cli, state, false);
      figures = u.figures;
      if (!u.ok) core.warning(`unmount of ${state.mounted.join(', ')} failed (exit ${u.r.status})`);
      if (wantSave) {
        // Without `unmount --save` the changes made in a mount cannot be saved (after unmount the
        // paths are empty mount points: saving them would store nothing).
        core.notice('This lazycache has no "unmount --save": the mounted paths were unmounted without saving; '
          + 'changes made inside them are not saved.');
        saved = 'no (unmount --save not available)';
      }
    }
  }
  const plainDirs = state.mounted.length === 0;
  if (!saved && plainDirs && wantSave) {
    // A miss (nothing mounted, the job filled plain directories), an extract, or lookup-only.
    const t = Date.now();
    const r = cli.run(saveArgs(cli, state), traceEnv(state));  // it takes the trace over
    if (r.status === 0) {
      saved = `save (${Date.now() - t} ms)`;
      const report = lc.jsonLines(r.stdout).pop();
      if (report && report.saved) {
        uploadRows.push(['Bytes uploaded', `${lc.formatBytes(report.archive_bytes)} (${report.files} files, `
          + `${lc.formatBytes(report.file_bytes)}, in ${report.ms} ms)`]);
      } else if (report) {
        saved = 'no (the entry exists: entries are immutable)';
      }
    } else {
      saved = `failed (exit ${r.status}, see log)`;
      core.warning(`Failed to save cache entry with key ${state.key} (exit ${r.status}); the job goes on.`);
    }
  }
  if (!saved) discardTrace(cli, state);
  if (!saved) {
    if (save === 'never') {
      saved = 'no (restore step; the save step saves)';
    } else if (exactHit) {
      saved = 'no (exact hit)';
      core.info(`Cache hit occurred on the primary key ${state.key}, not saving cache.`);
    } else if (!jobOk && !state.saveAlways) {
      saved = `no (job ${jobStatus}; save-always is off)`;
      core.info(`Not saving cache: the job status is ${jobStatus} and save-always is not set.`);
    } else {
      saved = 'no';
    }
  }
  rows.push(...figureRows(figures, state));
  rows.push(['Saved', saved], ...uploadRows);
  core.appendSummaryTable('lazycache', rows);
  if (figures.store_bytes !== undefined) core.info(`Fetched ${lc.formatBytes(figures.store_bytes)} during the job`);
}

module.exports = { post };

if (require.main === module) {
  post().catch((e) => core.warning(`lazycache post step: ${e && e.stack ? e.stack : e}`));
}
