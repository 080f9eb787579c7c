// SPDX-License-Identifier: MIT
// The entry of dist/post.js, shared by the action and its sub-actions (one bundle, not three):
// the hidden input lazycache-step says which step runs it.
//   ''        the main action's post step (unmount, save on a miss, summary)
//   'restore' restore/action.yml's post step: unmount what is still mounted, never save
//   'save'    save/action.yml's main step
'use strict';

const core = require('./core');
const { post } = require('./post');
const { save } = require('./save');

function run() {
  const step = core.getInput('lazycache-step');
  if (step === 'save') return save();
  return post({ save: step === 'restore' ? 'never' : 'auto' });
}

module.exports = { run };
