// SPDX-License-Identifier: MIT
// The save sub-action (packaging/github-action/save, like actions/cache/save): saves `path` under
// `key`. Paths the restore sub-action mounted are saved by `unmount --save` (and unmounted);
// plain directories by `save`. It always tries (the workflow's `if:` decides when to save); an
// entry that exists is skipped, entries being immutable.
'use strict';

const core = require('./core');
const { readInputs, storeArgs, keyArgs } = require('./inputs');
const lc = require('./lazycache');
const { post } = require('./post');

async function save() {
  let inputs;
  try {
    inputs = readInputs();
  } catch (e) {
    core.setFailed(e.message);
    return;
  }
  const bin = lc.findLazycache();
  if (!bin) {
    core.warning('lazycache is not installed (run the restore step, or the main action, first): not saving');
    return;
  }
  const mountPoints = lc.cacheMountPoints();
  const state = {
    key: inputs.key, paths: inputs.paths, storeArgs: storeArgs(inputs), keyArgs: keyArgs(inputs, { withRestoreKeys: false }),
    saveAlways: true, uploadChunkSize: inputs.uploadChunkSize, bin, matchedKey: '', mode: 'save', reason: '',
    mounted: inputs.paths.filter((p) => mountPoints.has(p)), mountMs: 0, fetched: null, ok: true,
  };
  await post({ save: 'always', given: state });
}

module.exports = { save };

if (require.main === module) {
  save().catch((e) => core.warning(`lazycache save step: ${e && e.stack ? e.stack : e}`));
}
