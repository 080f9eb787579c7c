// SPDX-License-Identifier: MIT
// The few pieces of @actions/core this action needs, on node's standard library only, so the
// committed dist/ runs with no `npm install`. Runner contract (the "workflow commands" docs):
//  - inputs arrive as INPUT_<NAME> with spaces turned into '_' and the name upper-cased
//    (dashes kept: INPUT_RESTORE-KEYS);
//  - outputs, state and exported variables are appended to the files named by GITHUB_OUTPUT,
//    GITHUB_STATE and GITHUB_ENV, each as "name<<DELIM\nvalue\nDELIM\n" with a random DELIM that
//    occurs in neither the name nor the value (a value may hold newlines);
//  - the post step reads state back as STATE_<name>;
//  - the job summary is Markdown appended to GITHUB_STEP_SUMMARY;
//  - annotations are "::notice::", "::warning::", "::error::" lines on stdout.
'use strict';

const fs = require('fs');
const crypto = require('crypto');
const os = require('os');

function getInput(name, options = {}) {
  const value = (process.env[`INPUT_${name.replace(/ /g, '_').toUpperCase()}`] || '').trim();
  if (options.required && !value) throw new Error(`Input required and not supplied: ${name}`);
  return value;
}

// Lines of a multiline input, trimmed, blanks dropped (as @actions/core's getMultilineInput).
function getMultilineInput(name, options = {}) {
  return getInput(name, options).split('\n').map((s) => s.trim()).filter((s) => s !== '');
}

// actions/cache compares booleans case-insensitively against "true"; anything else is false.
function getBooleanInput(name) {
  return getInput(name).toLowerCase() === 'true';
}

// "name<<DELIM\nvalue\nDELIM\n": the file commands' multiline form, safe for any value.
function fileCommandRecord(name, value) {
  const text = value === undefined || value === null ? '' : String(value);
  let delimiter;
  do {
    delimiter = `ghadelimiter_${crypto.randomUUID()}`;
  } while (name.includes(delimiter) || text.includes(delimiter));
  return `${name}<<${delimiter}${os.EOL}${text}${os.EOL}${delimiter}${os.EOL}`;
}

function appendFileCommand(envName, name, value) {
  const file = process.env[envName];
  if (!file) throw new Error(`${envName} is not set: not running under a GitHub Actions runner?`);
  if (!fs.existsSync(file)) throw new Error(`${envName} names a missing file: ${file}`);
  fs.appendFileSync(file, fileCommandRecord(name, value), { encoding: 'utf8' });
}

function setOutput(name, value) { appendFileCommand('GITHUB_OUTPUT', name, value); }
function saveState(name, value) { appendFileCommand('GITHUB_STATE', name, value); }
function exportVariable(name, value) {
  process.env[name] = String(value);
  appendFileCommand('GITHUB_ENV', name, value);
}
function getState(name) { return process.env[`STATE_${name}`] || ''; }

// Reads a file written in the file-command syntax (both "k=v" and "k<<D ... D") into an object:
// the inverse of fileCommandRecord, used for the CLI's own $GITHUB_OUTPUT lines.
function parseFileCommands(text) {
  const out = {};
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (line === '') continue;
    const heredoc = line.indexOf('<<');
    const eq = line.indexOf('=');
    if (heredoc > 0 && (eq < 0 || heredoc < eq)) {
      const name = line.slice(0, heredoc);
      const delimiter = line.slice(heredoc + 2);
      const value = [];
      i++;
      while (i < lines.length && lines[i] !== delimiter) value.push(lines[i++]);
      if (i >= lines.length) throw new Error(`unterminated value for ${name} (delimiter ${delimiter})`);
      out[name] = value.join('\n');
    } else if (eq > 0) {
      out[line.slice(0, eq)] = line.slice(eq + 1);
    } else {
      throw new Error(`not a file-command line: ${JSON.stringify(line)}`);
    }
  }
  return out;
}

// Annotation text must escape %, CR and LF (the runner's command encoding).
function escapeData(s) {
  return String(s).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}
function info(message) { process.stdout.write(`${message}${os.EOL}`); }
function notice(message) { process.stdout.write(`::notice::${escapeData(message)}${os.EOL}`); }
function warning(message) { process.stdout.write(`::warning::${escapeData(message)}${os.EOL}`); }
function error(message) { process.stdout.write(`::error::${escapeData(message)}${os.EOL}`); }
function setFailed(message) {
  process.exitCode = 1;
  error(message);
}
// Masks a value in the log (credentials passed as inputs).
function setSecret(value) {
  if (value) process.stdout.write(`::add-mask::${escapeData(value)}${os.EOL}`);
}

// Markdown table cell: pipes and newlines would break the row.
function cell(s) {
  return String(s === undefined || s === null ? '' : s).replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

// Appends a Markdown heading and a two-column table to the job summary; no-op without
// GITHUB_STEP_SUMMARY (a local run).
function appendSummaryTable(title, rows) {
  const file = process.env.GITHUB_STEP_SUMMARY;
  if (!file) return false;
  let md = `### ${title}${os.EOL}${os.EOL}| | |${os.EOL}|---|---|${os.EOL}`;
  for (const [k, v] of rows) md += `| ${cell(k)} | ${cell(v)} |${os.EOL}`;
  fs.appendFileSync(file, md + os.EOL, { encoding: 'utf8' });
  return true;
}

module.exports = {
  getInput, getMultilineInput, getBooleanInput, setOutput, saveState, getState, exportVariable,
  fileCommandRecord, parseFileCommands, info, notice, warning, error, setFailed, setSecret,
  appendSummaryTable, escapeData,
};
