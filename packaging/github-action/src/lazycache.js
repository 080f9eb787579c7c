// SPDX-License-Identifier: MIT
// Drives the lazycache CLI for the action: finds or installs it, builds the shared store/key
// arguments from the inputs, runs commands with their $GITHUB_OUTPUT captured in a private file
// (so the action, not the CLI, decides what the step outputs), and reads figures back.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const https = require('https');
const http = require('http');
const { spawnSync } = require('child_process');
const core = require('./core');

function isExecutable(file) {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

// LAZYCACHE_BIN (tests, unusual layouts), else lazycache in PATH, else "".
function findLazycache(env = process.env) {
  if (env.LAZYCACHE_BIN) return isExecutable(env.LAZYCACHE_BIN) ? env.LAZYCACHE_BIN : '';
  for (const dir of (env.PATH || '').split(path.delimiter)) {
    if (dir && isExecutable(path.join(dir, 'lazycache'))) return path.join(dir, 'lazycache');
  }
  return '';
}

function download(url, dest, redirects = 5) {
  return new Promise((resolve, reject) => {
    const get = url.startsWith('https:') ? https.get : http.get;
    get(url, (res) => {
      if ([301, 302, 303, 307, 308].includes(res.statusCode) && res.headers.location && redirects > 0) {
        res.resume();
        resolve(download(new URL(res.headers.location, url).toString(), dest, redirects - 1));
        return;
      }
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`downloading ${url}: HTTP ${res.statusCode}`));
        return;
      }
      const tmp = `${dest}.part`;
      const out = fs.createWriteStream(tmp);
      res.pipe(out);
      out.on('finish', () => out.close(() => { fs.renameSync(tmp, dest); resolve(dest); }));
      out.on('error', reject);
    }).on('error', (e) => reject(new Error(`downloading ${url}: ${e.message}`)));
  });
}

// Installs the .deb named by `deb` (a path or an http(s) URL) with apt-get, which also pulls in
// fuse3 and the libraries it depends on. Uses sudo when not root. Returns the binary's path.
async function installDeb(deb) {
  if (!deb) {
    throw new Error('lazycache is not installed and no "deb" input names a package to install '
      + '(a path or URL of lazycache_VERSION_amd64.deb; see the README)');
  }
  let file = deb;
  if (/^https?:\/\//.test(deb)) {
    const dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'lazycache-deb-'));
    file = path.join(dir, path.basename(new URL(deb).pathname) || 'lazycache.deb');
    core.info(`Downloading ${deb}`);
    await download(deb, file);
  }
  file = path.resolve(file);
  if (!fs.existsSync(file)) throw new Error(`the "deb" input names a missing file: ${file}`);
  const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const argv = ['apt-get', 'install', '-y', '-q', '--no-install-recommends', '-o', 'DPkg::Lock::Timeout=300', file];
  const cmd = asRoot ? argv : ['sudo', '-n', ...argv];
  core.info(`Installing ${file}: ${cmd.join(' ')}`);
  const r = spawnSync(cmd[0], cmd.slice(1), { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  if (r.error) throw new Error(`running ${cmd[0]}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`installing ${file} failed (exit ${r.status})`);
  const bin = findLazycache();
  if (!bin) throw new Error(`installed ${file} but lazycache is still not in PATH`);
  return bin;
}

// Runs `bin args...` with $GITHUB_OUTPUT redirected to a private file whose lines come back
// parsed in `outputs`. With `echo`, the child's stderr (its messages and progress lines) goes
// straight to the log as it is written, so a long save or restore is never silent; its stdout
// (the outputs, or the --json object) is captured and echoed when it ends. Never throws for a
// non-zero exit.
function run(bin, args, { env = process.env, echo = true } = {}) {
  const dir = fs.mkdtempSync(path.join(process.env.RUNNER_TEMP || os.tmpdir(), 'lazycache-run-'));
  const outFile = path.join(dir, 'output');
  fs.writeFileSync(outFile, '');
  if (echo) core.info(`[command]${bin} ${args.map(quoteArg).join(' ')}`);
  const r = spawnSync(bin, args, {
    env: { ...env, GITHUB_OUTPUT: outFile }, encoding: 'utf8', maxBuffer: 64 << 20,
    stdio: ['ignore', 'pipe', echo ? 'inherit' : 'pipe'],
  });
  const stdout = r.stdout || '';
  const stderr = r.stderr || '';
  if (echo && stdout) process.stdout.write(stdout.endsWith('\n') ? stdout : `${stdout}\n`);
  let outputs = {};
  try {
    outputs = core.parseFileCommands(fs.readFileSync(outFile, 'utf8'));
  } catch (e) {
    core.warning(`could not read the outputs of lazycache ${args[0]}: ${e.message}`);
  }
  fs.rmSync(dir, { recursive: true, force: true });
  return {
    status: r.error ? -1 : r.status, error: r.error ? r.error.message : '', stdout, stderr, outputs,
  };
}

function quoteArg(a) {
  return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`;
}

// What this lazycache binary offers: its commands and, per command, its options (from --help),
// so the action adapts to older or newer CLIs instead of guessing.
class Cli {
  constructor(bin) {
    this.bin = bin;
    this.helpCache = new Map();
    const top = spawnSync(bin, ['--help'], { encoding: 'utf8', env: { ...process.env, LAZYCACHE_CONFIG: '' } });
    this.commands = new Set();
    let inCommands = false;
    for (const line of (top.stdout || '').split('\n')) {
      if (line.startsWith('commands:')) { inCommands = true; continue; }
      if (inCommands && /^ {2}[a-z]/.test(line)) this.commands.add(line.trim().split(/\s+/)[0]);
      else if (inCommands && line.trim() === '') inCommands = false;
    }
    const v = spawnSync(bin, ['--version'], { encoding: 'utf8' });
    this.version = (v.stdout || '').trim();
  }

  has(command) { return this.commands.has(command); }

  hasOption(command, option) {
    if (!this.helpCache.has(command)) {
      const r = spawnSync(this.bin, [command, '--help'], { encoding: 'utf8', env: { ...process.env, LAZYCACHE_CONFIG: '' } });
      this.helpCache.set(command, r.status === 0 ? r.stdout : '');
    }
    return new RegExp(`(^|[\\s,])--${option}(?![\\w-])`, 'm').test(this.helpCache.get(command));
  }

  run(args, options) { return run(this.bin, args, options); }
}

// "12345" or "12M" style sizes from the upload-chunk-size input (bytes, as actions/cache).
function parseBytes(s) {
  const m = /^(\d+)$/.exec(String(s).trim());
  return m ? Number(m[1]) : NaN;
}

// The JSON objects a --json command printed, one per line (docs/cli.md, "JSON output").
function jsonLines(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const t = line.trim();
    if (!t.startsWith('{')) continue;
    try { out.push(JSON.parse(t)); } catch { /* not one of ours */ }
  }
  return out;
}

// The figures of `unmount --json` ({"path", "stats": {...}} per path), summed over the daemons:
// paths served by one daemon repeat its figures, so identical "stats" objects count once.
function sumJsonFigures(text) {
  const totals = {};
  const seen = new Set();
  for (const obj of jsonLines(text)) {
    const stats = obj.stats && typeof obj.stats === 'object' ? obj.stats : obj;
    const key = JSON.stringify(stats);
    if (seen.has(key)) continue;
    seen.add(key);
    for (const [k, v] of Object.entries(stats)) {
      if (typeof v === 'number' && Number.isFinite(v)) totals[k] = (totals[k] || 0) + v;
    }
  }
  return totals;
}

// The CLI's rule (common/byte_format.h, human_bytes): whole bytes below 1 KiB, then binary units
// with one decimal, the exact value rounded to nearest with ties to even as printf's "%.1f" does
// (toFixed rounds ties up: 1280 B would be "1.3 KiB" here and "1.2 KiB" in the CLI's lines). Exact
// integer arithmetic (BigInt), so no floating-point step can round differently. Both formatters
// are tested against one table, tests/common/byte_format_cases.txt. '' for what is not a count.
function formatBytes(n) {
  if (!Number.isFinite(n) || n < 0) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  const bytes = BigInt(Math.floor(n));
  let div = 1n;
  let u = 0;
  while (bytes >= div * 1024n && u < units.length - 1) { div *= 1024n; u++; }
  if (u === 0) return `${bytes} B`;
  let tenths = (bytes * 10n) / div;
  const twice = ((bytes * 10n) % div) * 2n;
  if (twice > div || (twice === div && tenths % 2n === 1n)) tenths += 1n;
  return `${tenths / 10n}.${tenths % 10n} ${units[u]}`;
}

// Mount points (from /proc/self/mountinfo) of FUSE file systems and of lazycache's kernel
// overlays (type "overlay", source "lazycache": a writable mount as root): which of the cache
// paths really are mounted, whatever the command printed.
function cacheMountPoints(mountinfo = '/proc/self/mountinfo') {
  const points = new Set();
  let text = '';
  try { text = fs.readFileSync(mountinfo, 'utf8'); } catch { return points; }
  for (const line of text.split('\n')) {
    const sep = line.indexOf(' - ');
    if (sep < 0) continue;
    const fields = line.slice(0, sep).split(' ');
    const [fstype, source] = line.slice(sep + 3).split(' ');
    // mountinfo escapes space, tab, newline and backslash as octal.
    const point = (fields[4] || '').replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
    if (fstype.startsWith('fuse') || (fstype === 'overlay' && source === 'lazycache')) points.add(point);
  }
  return points;
}

module.exports = {
  findLazycache, installDeb, run, Cli, parseBytes, jsonLines, sumJsonFigures, formatBytes, cacheMountPoints, quoteArg,
};
