/* Sluice dashboard: plain ES2020, no dependencies. All user data is rendered as text
   (textContent / text nodes / attributes); innerHTML is never used. */
(() => {
  'use strict';

  const SVGNS = 'http://www.w3.org/2000/svg';
  const STATES = ['waiting', 'delayed', 'active', 'completed', 'failed', 'cancelled',
    'sleeping', 'waiting-signal', 'waiting-event', 'waiting-child'];
  const isDone = (st) => st === 'completed' || st === 'failed' || st === 'cancelled';
  const cfg = { readOnly: true, pollMs: 2000, base: '' };
  try {
    const m = document.querySelector('meta[name="sluice-config"]');
    if (m) Object.assign(cfg, JSON.parse(m.getAttribute('content') || '{}'));
  } catch (_) { /* keep defaults */ }
  let readOnly = cfg.readOnly !== false;
  const POLL = Math.max(250, Number(cfg.pollMs) || 2000);
  const enc = encodeURIComponent;
  const dec = (x) => { try { return decodeURIComponent(x); } catch (_) { return x; } };
  // An API path segment. Run ids '.' and '..' are encoded twice: URLs drop dot segments even as %2E.
  const apiSeg = (x) => { const s = enc(x); return s === '.' || s === '..' ? s.replace(/\./g, '%252E') : s; };

  /* == DOM helpers == */
  function add(el, kids) {
    for (const c of kids) {
      if (c == null || c === false) continue;
      if (Array.isArray(c)) add(el, c);
      else el.appendChild(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  function h(tag, a, ...kids) {
    const el = document.createElement(tag);
    if (a) {
      for (const k in a) {
        const v = a[k];
        if (v == null || v === false || k === 'style') continue;
        if (k === 'class') el.className = v;
        else if (k === 'testid') el.setAttribute('data-testid', v);
        else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    return add(el, kids);
  }
  function s(tag, a, ...kids) {
    const el = document.createElementNS(SVGNS, tag);
    if (a) {
      for (const k in a) {
        if (a[k] == null || k === 'style') continue;
        el.setAttribute(k === 'testid' ? 'data-testid' : k, String(a[k]));
      }
    }
    return add(el, kids);
  }
  // Replace the children of box, keeping keyboard focus on the "same" control if possible.
  function sig(el) {
    const r = el.closest('[data-workflow],[data-group],[data-run],[data-schedule]');
    return [el.tagName, el.getAttribute('data-testid') || '', el.textContent,
      r ? ['workflow', 'group', 'run', 'schedule'].map((k) => r.getAttribute('data-' + k)).join('\u0001') : ''].join('\u0002');
  }
  function swap(box, nodes) {
    const a = document.activeElement;
    const k = a && a !== document.body && box.contains(a) ? sig(a) : null;
    box.replaceChildren(...[].concat(nodes).filter((n) => n != null));
    if (k) {
      for (const e of box.querySelectorAll('a,button,input,select')) {
        if (sig(e) === k) { e.focus(); break; }
      }
    }
  }
  const btn = (label, tid, fn, extra) =>
    h('button', { type: 'button', class: 'btn btn-sm' + (extra ? ' ' + extra : ''), testid: tid, onclick: fn }, label);
  const dash = () => h('span', { class: 'muted' }, '—');
  const cls = (x) => String(x == null ? '' : x).toLowerCase().replace(/[^a-z0-9-]/g, '');
  const badge = (st, tid) => h('span', { class: 'st st-' + cls(st), testid: tid }, String(st == null ? '?' : st));
  const pausedBadge = (p) => (p ? badge('paused') : badge('running'));
  const trunc = (x, n) => (x.length > n ? x.slice(0, n - 1) + '…' : x);
  const str = (x) => (x == null ? '' : typeof x === 'string' ? x : JSON.stringify(x));

  /* == formatting == */
  const nf = new Intl.NumberFormat('en-US');
  const nf2 = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });
  const num = (n) => (n == null || n === '' || !isFinite(n) ? '—' : nf.format(n));
  const pad = (n) => String(n).padStart(2, '0');
  function toDate(v) {
    if (v == null || v === '') return null;
    const d = v instanceof Date ? v : new Date(typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : v);
    return isNaN(d.getTime()) ? null : d;
  }
  const toMs = (v) => { const d = toDate(v); return d ? d.getTime() : null; };
  function clock(v, secs = true) {
    const d = toDate(v);
    if (!d) return '—';
    return pad(d.getHours()) + ':' + pad(d.getMinutes()) + (secs ? ':' + pad(d.getSeconds()) : '');
  }
  function fmtTime(v) {
    const d = toDate(v);
    if (!d) return '—';
    if (d.toDateString() === new Date().toDateString()) return clock(d);
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(d)}`;
  }
  function fmtDur(ms) {
    if (ms == null || !isFinite(ms)) return '—';
    ms = Math.max(0, ms);
    if (ms < 1000) return Math.round(ms) + ' ms';
    const sec = ms / 1000;
    if (sec < 60) return (sec < 10 ? +sec.toFixed(1) : Math.round(sec)) + ' s';
    const m = Math.floor(sec / 60);
    if (m < 60) return `${m}m` + (sec % 60 >= 1 ? ` ${Math.floor(sec % 60)}s` : '');
    const hr = Math.floor(m / 60);
    if (hr < 48) return `${hr}h` + (m % 60 ? ` ${m % 60}m` : '');
    return `${Math.floor(hr / 24)}d ${hr % 24}h`;
  }
  const md = new Intl.DateTimeFormat('en-US', { month: 'short', day: 'numeric' });
  // short: "Dec 3 02:00" (seconds only when not zero), for schedule times.
  function tm(v, short) {
    const d = toDate(v);
    if (!d) return dash();
    const t = !short ? fmtTime(d) : (d.toDateString() === new Date().toDateString() ? '' : md.format(d) + ' ') + clock(d, d.getSeconds() > 0);
    return h('time', { datetime: d.toISOString(), title: d.toLocaleString() }, t);
  }
  const PER = { 1000: '/s', 60000: '/min', 3600000: '/h' };
  const rate = (r) => (r && r.max != null ? num(r.max) + (PER[r.perMs] || ' / ' + fmtDur(r.perMs)) : dash());
  const capText = (c) => (c == null ? dash() : num(c));
  /* A payload JSON cannot show (a Date, Map, BigInt…) comes as the text Node prints for it. */
  function shown(r, field) {
    return r.shown && typeof r.shown[field] === 'string' ? r.shown[field] : pretty(r[field]);
  }
  function pretty(v) {
    try { const t = JSON.stringify(v, null, 2); return t === undefined ? String(v) : t; } catch (_) { return String(v); }
  }
  function nice(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    const f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }
  const runsRoute = (o) => {
    const p = new URLSearchParams();
    for (const k of ['workflow', 'state', 'group', 'dedupe', 'order', 'id', 'event', 'eventId', 'batch']) if (o[k] != null && o[k] !== '') p.set(k, o[k]);
    return '#/runs?' + p.toString();
  };
  const intOk = (v, lo, hi) => /^\d+$/.test(v) && +v >= lo && +v <= hi;

  /* == HTTP == */
  async function api(path, body) {
    const opt = { headers: { accept: 'application/json' }, credentials: 'same-origin', cache: 'no-store' };
    if (body !== undefined) {
      opt.method = 'POST';
      opt.headers['content-type'] = 'application/json';
      opt.headers['x-sluice-csrf'] = '1';
      opt.body = JSON.stringify(body);
    }
    let res;
    // From the origin: a page opened as http://user:pass@host/… has those credentials in its URL, and
    // fetch refuses a URL that holds them (a relative one resolves against the page's).
    try { res = await fetch(location.origin + String(cfg.base) + path, opt); } catch (e) {
      throw new Error('Network error: ' + ((e && e.message) || e));
    }
    let data = null;
    let txt = '';
    try { txt = await res.text(); data = txt ? JSON.parse(txt) : null; } catch (_) { data = null; }
    if (!res.ok) {
      let msg = data && data.message != null ? data.message : '';
      if (Array.isArray(msg)) msg = msg.join('; ');
      const err = new Error(`Error ${res.status}: ${String(msg || res.statusText || 'request failed')}`);
      err.status = res.status;
      throw err;
    }
    if (data == null || typeof data !== 'object') throw new Error('Unexpected (non-JSON) response from ' + path);
    return data;
  }
  const errMsg = (e) => (e && e.message ? e.message : String(e));

  /* == shell == */
  const app = document.getElementById('app') || document.body.appendChild(h('div', { id: 'app' }));
  const navLinks = {};
  const nav = h('nav', { class: 'nav', 'aria-label': 'Main' },
    [['', 'Overview'], ['runs', 'Runs'], ['schedules', 'Schedules']].map(([k, t]) =>
      (navLinks[k] = h('a', { href: '#/' + k, testid: 'nav-' + (k || 'overview') }, t))));
  const roBadge = h('span', { class: 'ro', testid: 'readonly-badge', title: 'Actions are disabled on this dashboard' }, 'read-only');
  const flashText = h('span', { class: 'flash-text' });
  const flashBox = h('div', { class: 'flash', role: 'status', 'aria-live': 'polite', testid: 'flash', hidden: true },
    flashText, h('button', { type: 'button', class: 'x', 'aria-label': 'Dismiss message', onclick: () => clearFlash() }, '×'));
  const view = h('main', { class: 'view', id: 'view' });
  app.replaceChildren(
    h('header', { class: 'top' }, h('div', { class: 'wrap top-in' },
      h('a', { class: 'brand', href: '#/' }, 'Sluice'), nav, roBadge)),
    h('div', { class: 'wrap' }, flashBox, view));
  function setRO(v) { readOnly = !!v; roBadge.hidden = !readOnly; }
  setRO(readOnly);

  let flashTimer = 0;
  let flashSrc = '';
  let keepFlash = false; // an action that navigates keeps its message across that one route change
  function flash(msg, kind, src) {
    clearTimeout(flashTimer);
    flashSrc = src || 'action';
    flashText.textContent = String(msg);
    flashBox.className = 'flash flash-' + (kind || 'ok');
    flashBox.hidden = false;
    if (kind !== 'err') flashTimer = setTimeout(clearFlash, 8000);
  }
  function clearFlash() { clearTimeout(flashTimer); flashBox.hidden = true; flashText.textContent = ''; flashSrc = ''; }
  const loadOk = () => { if (flashSrc === 'load') clearFlash(); };
  const loadErr = (e, what) => flash(`Could not load ${what}: ${errMsg(e)}`, 'err', 'load');
  // A page's data for view `t`: undefined if it failed (reported, and said in `out` when given) or the view changed meanwhile.
  async function load(t, url, what, out) {
    let d;
    try { d = await api(url); } catch (e) {
      if (t === token) { loadErr(e, what); if (out) swap(out, h('p', { class: 'empty' }, `Could not load ${what}.`)); }
      return undefined;
    }
    if (t !== token) return undefined;
    loadOk();
    return d;
  }

  /* == confirm dialog == */
  const dlg = h('dialog', { class: 'dlg', testid: 'confirm-dialog', 'aria-labelledby': 'dlg-title', 'aria-describedby': 'dlg-desc' });
  document.body.appendChild(dlg);
  let dlgDone = null;
  dlg.addEventListener('close', () => { if (dlgDone && !dlg.open) dlgDone(null); });
  function closeDlg() {
    if (typeof dlg.close === 'function') { if (dlg.open) dlg.close(); } else dlg.removeAttribute('open');
  }
  // o: { title, text: string | (values) => string, fields?, ok?, no?, danger?, validate?(values) }
  function ask(o) {
    if (dlgDone) dlgDone(null);
    return new Promise((resolve) => {
      const inputs = {};
      const desc = h('p', { class: 'dlg-desc', id: 'dlg-desc', testid: 'confirm-text' });
      const err = h('p', { class: 'dlg-err', role: 'alert' });
      const vals = () => { const v = {}; for (const k in inputs) v[k] = inputs[k].value.trim(); return v; };
      const upd = () => { desc.textContent = typeof o.text === 'function' ? o.text(vals()) : o.text; err.textContent = ''; };
      const finish = (v) => { dlgDone = null; closeDlg(); resolve(v); };
      const no = h('button', { type: 'button', class: 'btn', testid: 'confirm-cancel', onclick: () => finish(null) }, o.no || 'Cancel');
      const ok = h('button', {
        type: 'button', class: 'btn ' + (o.danger ? 'btn-danger' : 'btn-primary'), testid: 'confirm-ok',
        onclick: () => {
          const v = vals();
          const e = o.validate ? o.validate(v) : null;
          if (e) { err.textContent = e; return; }
          finish(v);
        },
      }, o.ok || 'Confirm');
      const fields = (o.fields || []).map((f, i) => {
        const id = 'dlg-f-' + f.name;
        const tid = i === 0 ? 'confirm-input' : 'confirm-' + f.name;
        const el = f.options
          ? h('select', { id, testid: tid }, f.options.map(([v, t]) => h('option', { value: v, selected: String(f.value) === v }, t)))
          : h('input', {
            id, testid: tid, type: 'number', inputmode: 'numeric', step: 1, min: f.min, max: f.max,
            placeholder: f.placeholder, value: f.value == null ? '' : f.value, autocomplete: 'off',
            onkeydown: (e) => { if (e.key === 'Enter') { e.preventDefault(); ok.click(); } },
          });
        el.addEventListener('input', upd);
        el.addEventListener('change', upd);
        inputs[f.name] = el;
        return h('div', { class: 'fld' }, h('label', { for: id }, f.label), el);
      });
      dlg.replaceChildren(h('h2', { id: 'dlg-title' }, o.title), desc, ...fields, err, h('div', { class: 'dlg-btns' }, no, ok));
      upd();
      dlgDone = finish;
      try { dlg.showModal(); } catch (_) { dlg.setAttribute('open', ''); }
      const first = fields.length ? inputs[o.fields[0].name] : o.danger ? no : ok;
      first.focus();
      if (first.tagName === 'INPUT') { try { first.select(); } catch (_) { /* ignore */ } }
    });
  }
  async function act(o) {
    const v = await ask(o);
    if (!v) return;
    let r;
    try { r = await api(o.path, o.body ? o.body(v) : {}); } catch (e) { flash(errMsg(e), 'err'); return; }
    flash(r && r.message != null ? String(r.message) : 'Done.', 'ok');
    if (o.after) o.after(r); else refreshNow();
  }

  /* == routing & polling == */
  let token = 0;
  let cur = null;
  let timer = 0;
  function setView(load, poll) { cur = { load, poll, busy: false, again: false }; refreshNow(); }
  async function refreshNow() {
    const c = cur;
    if (!c) return;
    if (c.busy) { c.again = true; return; }
    c.busy = true;
    clearTimeout(timer);
    try { await c.load(); } catch (e) { if (c === cur) flash(errMsg(e), 'err', 'load'); }
    c.busy = false;
    if (c !== cur) return;
    if (c.again) { c.again = false; refreshNow(); return; }
    schedule();
  }
  function schedule() {
    clearTimeout(timer);
    if (cur && cur.poll && document.visibilityState !== 'hidden') timer = setTimeout(refreshNow, POLL);
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'hidden') clearTimeout(timer);
    else if (cur && cur.poll) refreshNow();
  });
  function go(hash) { if (location.hash === hash) route(); else location.hash = hash; }
  const refreshBtn = () => btn('Refresh', 'refresh', () => refreshNow());
  const pager = (prev, label, next) => h('div', { class: 'pager' }, prev ? btn('← Previous', 'prev-page', prev) : null,
    h('span', { class: 'muted' }, label), next ? btn('Next page →', 'next-page', next) : null);
  const thead = (cols) => h('thead', null, h('tr', null, cols.map(([c, k, ti]) => h('th', { scope: 'col', class: k, title: ti }, c))));
  const pageHead = (title, ...extra) => h('div', { class: 'page-head' }, h('h1', null, title), extra);

  function route() {
    token++;
    clearTimeout(timer);
    cur = null;
    if (keepFlash) keepFlash = false; else clearFlash();
    const raw = location.hash.replace(/^#/, '') || '/';
    const qi = raw.indexOf('?');
    const path = qi < 0 ? raw : raw.slice(0, qi);
    const qs = new URLSearchParams(qi < 0 ? '' : raw.slice(qi + 1));
    const seg = path.split('/').filter(Boolean).map(dec);
    const sec = seg[0] === 'workflows' ? '' : seg[0] || '';
    for (const k in navLinks) {
      if (k === sec) navLinks[k].setAttribute('aria-current', 'page'); else navLinks[k].removeAttribute('aria-current');
    }
    window.scrollTo(0, 0);
    if (!seg.length) overview();
    else if (seg[0] === 'runs' && seg.length === 1) runsPage(qs);
    else if (seg[0] === 'runs') runPage(seg.slice(1).join('/'));
    else if (seg[0] === 'workflows' && seg[2] === 'groups' && seg.length === 3) groupsPage(seg[1], qs);
    else if (seg[0] === 'schedules') schedulesPage(qs);
    else view.replaceChildren(pageHead('Not found'), h('p', null, 'No such page. ', h('a', { href: '#/' }, 'Go to the overview')));
  }

  /* == dialogs for limits == */
  function who(wf, g) {
    if (g === '*') return `each group of “${wf}” (default cap for groups without their own)`;
    if (g !== undefined) return `group “${g}” of “${wf}”`;
    return `workflow “${wf}”`;
  }
  const scopeField = { name: 'scope', label: 'Applies to', value: '', options: [['', 'the whole workflow'], ['*', 'each group (group default)']] };
  function capDialog(wf, current, group, after) {
    const fields = [{ name: 'limit', label: 'Max active runs at a time (empty = no cap)', value: current, min: 0, placeholder: 'no cap' }];
    if (group === undefined) fields.push(scopeField);
    const gOf = (v) => (group !== undefined ? group : v.scope || undefined);
    act({
      title: 'Set concurrency cap', fields, ok: 'Save', after,
      text: (v) => (v.limit === ''
        ? `Remove the concurrency cap of ${who(wf, gOf(v))}.`
        : `Allow at most ${intOk(v.limit, 0, 1e12) ? num(+v.limit) : 'N'} active runs at a time for ${who(wf, gOf(v))}.`),
      validate: (v) => (v.limit === '' || intOk(v.limit, 0, 1e12) ? null : 'Enter a whole number ≥ 0, or leave empty to remove the cap.'),
      path: `api/workflows/${apiSeg(wf)}/limits`,
      body: (v) => { const b = { limit: v.limit === '' ? null : +v.limit }; const g = gOf(v); if (g !== undefined) b.group = g; return b; },
    });
  }
  function rateDialog(wf, rl, group) {
    const fields = [
      { name: 'max', label: 'Max runs started per window (empty = no rate limit)', value: rl ? rl.max : '', min: 1, placeholder: 'no limit' },
      { name: 'perMs', label: 'Window length (ms)', value: rl ? rl.perMs : 1000, min: 1 },
    ];
    if (group === undefined) fields.push(scopeField);
    const gOf = (v) => (group !== undefined ? group : v.scope || undefined);
    act({
      title: 'Set rate limit', ok: 'Save', fields,
      text: (v) => {
        const w = who(wf, gOf(v));
        if (v.max === '') return `Remove the rate limit of ${w}.`;
        return `Start at most ${intOk(v.max, 1, 1e12) ? num(+v.max) : 'N'} runs per ${intOk(v.perMs, 1, 1e12) ? fmtDur(+v.perMs) : '?'} for ${w}.`;
      },
      validate: (v) => {
        if (v.max === '') return null;
        if (!intOk(v.max, 1, 1e12)) return 'Max must be a whole number ≥ 1 (or empty to remove).';
        return intOk(v.perMs, 1, 1e12) ? null : 'Window must be a whole number of milliseconds ≥ 1.';
      },
      path: `api/workflows/${apiSeg(wf)}/limits`,
      body: (v) => {
        const b = { rateLimit: v.max === '' ? null : { max: +v.max, perMs: +v.perMs } };
        const g = gOf(v);
        if (g !== undefined) b.group = g;
        return b;
      },
    });
  }
  function pauseAct(wf, paused, group) {
    const tgt = group === undefined ? `workflow “${wf}”` : `group “${group}” of “${wf}”`;
    const body = () => (group === undefined ? {} : { group });
    const path = `api/workflows/${apiSeg(wf)}/${paused ? 'resume' : 'pause'}`;
    if (paused) {
      return act({ title: 'Resume', ok: 'Resume', path, body, text: `Resume ${tgt}: its waiting runs will be started again (within caps and rate limits).` });
    }
    return act({ title: 'Pause', ok: 'Pause', path, body, text: `Pause ${tgt}: no new runs of it will be started until it is resumed. Runs can still be enqueued.` });
  }

  /* == overview == */
  let wfNames = [];
  function cnt(wf, state, v, tid, title) {
    const c = 'cnt' + (v ? '' : ' zero') + (state === 'failed' && v ? ' bad' : '');
    return h('td', { class: 'n' }, h('a', {
      href: runsRoute({ workflow: wf, state }), class: c, testid: tid || 'count-link', 'data-state': state,
      title: title || `${state} runs of ${wf}`,
    }, num(v || 0)));
  }
  // A workflow-wide value over its per-group default, labelled.
  const pair = (t1, v1, t2, v2) => h('td', null, h('div', { class: 'pair' },
    h('span', { class: 'k' }, 'workflow'), h('span', { testid: t1 }, v1), h('span', { class: 'k' }, 'per group'), h('span', { testid: t2 }, v2)));
  function wfRow(w) {
    const n = String(w.name);
    const parts = { sleeping: w.sleeping || 0, 'waiting-signal': w.waitingSignal || 0, 'waiting-event': w.waitingEvent || 0, 'waiting-child': w.waitingChild || 0 };
    const keys = Object.keys(parts);
    const sum = keys.reduce((a, k) => a + parts[k], 0);
    const top = keys.reduce((a, k) => (parts[k] > parts[a] ? k : a), keys[0]);
    const cells = [
      h('th', { scope: 'row', class: 'wf-name' }, h('span', { class: 'name' }, n),
        h('a', { href: `#/workflows/${enc(n)}/groups`, class: 'sub', testid: 'groups-link' }, 'groups')),
      cnt(n, 'waiting', w.waiting), cnt(n, 'delayed', w.delayed), cnt(n, 'active', w.active),
      cnt(n, top, sum, 'waiting-on', keys.map((k) => `${k}: ${num(parts[k])}`).join('\n')),
      cnt(n, 'completed', w.completed, 'completed-link', `${num(w.completed || 0)} runs of ${n} completed in all. The list shows those still kept that completed while a dashboard was open (all of them with @Workflow indexCompleted)`),
      cnt(n, 'failed', w.failed, 'failed-link', `${num(w.failed || 0)} times a run of ${n} failed for good, in all. The list shows the runs in the failed state now`),
      cnt(n, 'cancelled', w.cancelled, null, `${num(w.cancelled || 0)} runs of ${n} cancelled in all. The list shows those still kept`),
      pair('wf-cap', capText(w.limit), 'wf-group-cap', capText(w.groupLimit)),
      pair(null, rate(w.rateLimit), null, rate(w.groupRateLimit)),
      h('td', { testid: 'wf-status' }, pausedBadge(w.paused)),
    ];
    if (!readOnly) {
      cells.push(h('td', null, h('div', { class: 'acts wf-acts' },
        w.paused ? btn('Resume', 'wf-resume', () => pauseAct(n, true)) : btn('Pause', 'wf-pause', () => pauseAct(n, false)),
        btn('Retry failed', 'retry-failed', () => act({
          title: 'Retry failed runs', ok: 'Retry',
          fields: [{ name: 'limit', label: 'How many at most (1–1000)', value: 100, min: 1, max: 1000 }],
          text: (v) => `Put up to ${intOk(v.limit, 1, 1000) ? num(+v.limit) : 'N'} failed runs of “${n}” back in the queue to run again.`,
          validate: (v) => (intOk(v.limit, 1, 1000) ? null : 'Enter a whole number from 1 to 1000.'),
          path: `api/workflows/${apiSeg(n)}/retry-failed`, body: (v) => ({ limit: +v.limit }),
        })),
        btn('Set cap', 'set-cap', () => capDialog(n, w.limit)),
        btn('Rate limit', 'set-rate-limit', () => rateDialog(n, w.rateLimit)))));
    }
    return h('tr', { testid: 'wf-row', 'data-workflow': n, class: w.paused ? 'is-paused' : null }, cells);
  }
  function overview() {
    const t = token;
    const head = h('div', { class: 'ov-head' });
    const tbl = h('div', { class: 'tbl-wrap' }, h('p', { class: 'empty' }, 'Loading…'));
    const chartBox = h('div', { class: 'chart-box' });
    view.replaceChildren(pageHead('Overview', head),
      h('section', { 'aria-labelledby': 'wf-h' }, h('h2', { id: 'wf-h' }, 'Workflows'), tbl),
      h('section', { 'aria-labelledby': 'tp-h' }, h('h2', { id: 'tp-h' }, 'Throughput (all workflows)'), chartBox));
    setView(async () => {
      const d = await load(t, 'api/overview', 'overview');
      if (!d) return;
      if (typeof d.readOnly === 'boolean') setRO(d.readOnly);
      const wfs = Array.isArray(d.workflows) ? d.workflows : [];
      wfNames = wfs.map((w) => String(w.name));
      const ns = d.namespace || {};
      swap(head, [
        h('p', { class: 'ns', testid: 'namespace' }, 'Namespace: ',
          h('strong', { testid: 'ns-active' }, num(ns.active || 0)), ' active / ',
          h('strong', { testid: 'ns-limit' }, ns.limit == null ? 'no limit' : num(ns.limit)),
          ns.limit > 0 ? h('meter', { min: 0, max: ns.limit, value: Math.min(ns.active || 0, ns.limit), 'aria-label': 'namespace usage' }) : null),
        h('span', { class: 'updated', testid: 'updated-at', title: 'Refreshes every ' + fmtDur(POLL) }, 'updated ' + clock(d.at || Date.now())),
      ]);
      const cols = [['Workflow'], ['Waiting', 'n'], ['Delayed', 'n'], ['Active', 'n'],
        ['Waiting on', 'n', 'sleeping + waiting for a signal, event or child run'],
        ['Completed (total)', 'n', 'runs completed since the namespace began (a running total)'],
        ['Failed (total)', 'n', 'runs that failed for good since the namespace began (a running total: a run retried by hand that fails again counts again); retried attempts are not counted'],
        ['Cancelled (total)', 'n', 'runs cancelled since the namespace began (a running total)'],
        ['Caps', '', 'max active runs at a time: whole workflow / default per group'],
        ['Rate limits', '', 'max runs started per window: whole workflow / default per group'], ['Status']];
      if (!readOnly) cols.push(['Actions']);
      swap(tbl, wfs.length
        ? h('table', { class: 'tbl', testid: 'workflows-table' },
          thead(cols),
          h('tbody', null, wfs.map(wfRow)))
        : h('p', { class: 'empty' }, 'No workflows have been registered in this namespace yet.'));
      swap(chartBox, chart(d.throughput, chartBox.clientWidth - 24));
    }, true);
  }

  function chart(tp, W) {
    const at = tp && Array.isArray(tp.at) ? tp.at : [];
    if (at.length < 2) {
      return h('p', { class: 'empty', testid: 'throughput-empty' }, 'Not enough data yet: the chart appears once at least two samples have been taken.');
    }
    const n = at.length;
    const C = new Array(n).fill(0);
    const F = new Array(n).fill(0);
    const ws = tp.workflows || {};
    for (const k in ws) {
      const x = ws[k] || {};
      for (let i = 0; i < n; i++) {
        C[i] += +((x.completed || [])[i]) || 0;
        F[i] += +((x.failed || [])[i]) || 0;
      }
    }
    W = Math.max(480, Math.min(W > 0 ? W : 900, 1600));
    const H = 230;
    const ml = 56;
    const mr = 16;
    const mt = 12;
    const mb = 42;
    const pw = W - ml - mr;
    const ph = H - mt - mb;
    const ymax = nice(Math.max(...C, ...F));
    const a0 = at[0];
    const sp = at[n - 1] - a0 || 1;
    const X = (t) => ml + ((t - a0) / sp) * pw;
    const Y = (v) => mt + ph - (v / ymax) * ph;
    const yb = mt + ph;
    const svg = s('svg', { class: 'chart', testid: 'throughput-chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': 'Completed and failed runs per second over time' },
      s('title', null, 'Throughput: completed/s and failed/s, all workflows'));
    for (let k = 0; k <= 4; k++) {
      const v = (ymax * k) / 4;
      const y = Y(v);
      svg.append(s('line', { class: 'grid', x1: ml, x2: W - mr, y1: y, y2: y }),
        s('text', { class: 'tick', x: ml - 6, y: y + 4, 'text-anchor': 'end' }, nf2.format(v)));
    }
    const secs = sp < 600000 || (tp.stepMs || 0) < 60000;
    for (let k = 0; k <= 4; k++) {
      const tt = a0 + (sp * k) / 4;
      const x = X(tt);
      svg.append(s('line', { class: 'axis', x1: x, x2: x, y1: yb, y2: yb + 4 }),
        s('text', { class: 'tick', x, y: yb + 16, 'text-anchor': k === 0 ? 'start' : k === 4 ? 'end' : 'middle' }, clock(tt, secs)));
    }
    svg.append(s('line', { class: 'axis', x1: ml, x2: W - mr, y1: yb, y2: yb }),
      s('line', { class: 'axis', x1: ml, x2: ml, y1: mt, y2: yb }),
      s('text', { class: 'axis-title', x: ml + pw / 2, y: H - 6, 'text-anchor': 'middle' }, 'time'),
      s('text', { class: 'axis-title', transform: 'rotate(-90)', x: -(mt + ph / 2), y: 14, 'text-anchor': 'middle' }, 'runs/s'));
    const pts = (arr) => arr.map((v, i) => `${X(at[i]).toFixed(1)},${Y(v).toFixed(1)}`).join(' ');
    svg.append(s('polygon', { class: 'area', points: `${ml},${yb} ${pts(C)} ${X(at[n - 1]).toFixed(1)},${yb}` }),
      s('polyline', { class: 'ln ln-completed', 'data-series': 'completed', points: pts(C) }),
      s('polyline', { class: 'ln ln-failed', 'data-series': 'failed', points: pts(F) }));
    for (let i = 0; i < n; i++) {
      const x0 = i ? (X(at[i - 1]) + X(at[i])) / 2 : ml;
      const x1 = i < n - 1 ? (X(at[i]) + X(at[i + 1])) / 2 : W - mr;
      svg.append(s('rect', { class: 'hot', 'pointer-events': 'all', x: x0, y: mt, width: Math.max(x1 - x0, 0.5), height: ph },
        s('title', null, `${fmtTime(at[i])}: completed ${nf2.format(C[i])}/s, failed ${nf2.format(F[i])}/s`)));
    }
    const legend = h('ul', { class: 'legend', testid: 'throughput-legend' },
      h('li', null, h('span', { class: 'sw sw-ok', 'aria-hidden': 'true' }), `completed/s (latest ${nf2.format(C[n - 1])})`),
      h('li', null, h('span', { class: 'sw sw-failed', 'aria-hidden': 'true' }), `failed/s (latest ${nf2.format(F[n - 1])})`),
      h('li', { class: 'muted' }, `${n} samples, ${fmtDur(tp.stepMs)} apart`));
    return [svg, legend];
  }

  /* == groups == */
  function groupsPage(wf, qs) {
    const t = token;
    const off = Math.max(0, parseInt(qs.get('offset'), 10) || 0);
    const only = ['rate-held', 'paused'].includes(qs.get('only')) ? qs.get('only') : '';
    const q = qs.get('q') || '';
    const route = (o, x) => {
      const p = new URLSearchParams();
      if (o.offset) p.set('offset', String(o.offset));
      if (x.only) p.set('only', x.only);
      if (x.q) p.set('q', x.q);
      const s = p.toString();
      return `#/workflows/${enc(wf)}/groups` + (s ? '?' + s : '');
    };
    const fOnly = h('select', { id: 'g-only', testid: 'group-filter-only' },
      [['', 'all groups with work'], ['rate-held', 'held by their rate limit'], ['paused', 'paused']].map(([x, tx]) => h('option', { value: x, selected: x === only }, tx)));
    const fQ = h('input', { id: 'g-q', testid: 'group-filter-name', type: 'search', value: q, placeholder: 'part of a group name', autocomplete: 'off' });
    const form = h('form', {
      class: 'filters', role: 'search', 'aria-label': 'Filter groups',
      onsubmit: (e) => { e.preventDefault(); go(route({}, { only: fOnly.value, q: fQ.value.trim() })); },
    },
    h('label', { for: 'g-only' }, 'Show', fOnly), h('label', { for: 'g-q' }, 'Name', fQ),
    h('button', { type: 'submit', class: 'btn btn-primary', testid: 'group-filter-apply' }, 'Apply'));
    const out = h('div', null, h('p', { class: 'empty' }, 'Loading…'));
    view.replaceChildren(pageHead(['Groups of ', h('span', { class: 'code' }, wf)],
      h('a', { href: '#/' }, '← Overview'), h('a', { href: runsRoute({ workflow: wf, state: 'waiting' }) }, 'Runs'), refreshBtn()), form, out);
    setView(async () => {
      const p = new URLSearchParams({ offset: String(off), limit: '50' });
      if (only) p.set('only', only);
      if (q) p.set('q', q);
      const d = await load(t, `api/workflows/${apiSeg(wf)}/groups?${p}`, 'groups', out);
      if (!d) return;
      const gs = Array.isArray(d.groups) ? d.groups : [];
      const cols = [['Group'], ['Waiting', 'n'], ['Active', 'n'], ['Limit', 'n'], ['Rate limit', '', 'max runs started per window: its own, else the default of every group'], ['Status']];
      if (!readOnly) cols.push(['Actions']);
      const rows = gs.map((g) => {
        const gn = String(g.name);
        const cells = [
          h('th', { scope: 'row' }, h('a', { href: runsRoute({ workflow: wf, state: 'waiting', group: gn }), testid: 'group-link', class: 'code' }, gn)),
          cnt(wf, 'waiting', g.waiting, 'count-link', `waiting runs in group ${gn}`),
          cnt(wf, 'active', g.active, 'count-link', `active runs in group ${gn}`),
          h('td', { class: 'n' }, g.limit == null ? h('span', { class: 'muted', title: 'no cap for this group (neither its own nor a default)' }, 'none') : num(g.limit)),
          h('td', { testid: 'group-rate' }, rate(g.rateLimit),
            g.rateHeldUntil ? h('span', { class: 'sub muted', testid: 'group-rate-held' }, 'held until ', tm(g.rateHeldUntil, 1)) : ''),
          h('td', null, !g.paused && d.workflowPaused ? h('span', { class: 'st st-paused', title: 'the whole workflow is paused' }, 'paused (workflow)') : pausedBadge(g.paused)),
        ];
        // count links must carry the group filter too
        for (const c of cells.slice(1, 3)) {
          const a = c.firstChild;
          a.setAttribute('href', runsRoute({ workflow: wf, state: a.getAttribute('data-state'), group: gn }));
        }
        if (!readOnly) {
          cells.push(h('td', null, h('div', { class: 'acts' },
            g.paused ? btn('Resume', 'group-resume', () => pauseAct(wf, true, gn)) : btn('Pause', 'group-pause', () => pauseAct(wf, false, gn)),
            btn('Set cap', 'group-set-cap', () => capDialog(wf, g.limit, gn)),
            btn('Rate limit', 'group-set-rate-limit', () => rateDialog(wf, g.rateLimit, gn)))));
        }
        return h('tr', { testid: 'group-row', 'data-group': gn, class: g.paused ? 'is-paused' : null }, cells);
      });
      const filtered = only || q;
      swap(out, [
        gs.length
          ? h('div', { class: 'tbl-wrap' }, h('table', { class: 'tbl', testid: 'groups-table' },
            thead(cols),
            h('tbody', null, rows)))
          : h('p', { class: 'empty', testid: 'groups-empty' }, off ? 'No more groups.' : filtered ? 'No group with work matches the filter.' : 'No groups with work right now.'),
        d.omitted > 0 ? h('p', { class: 'note', testid: 'groups-omitted' }, `${num(d.omitted)} more groups with work not shown: the busiest of the first 1,000 groups stats() lists are shown.`) : null,
        pager(off > 0 && (() => go(route({ offset: Math.max(0, off - 50) }, { only, q }))),
          gs.length ? `Groups ${num(off + 1)}–${num(off + gs.length)} of ${num(d.total)} (busiest first)` : '',
          d.next != null && (() => go(route({ offset: d.next }, { only, q })))),
      ]);
    }, false);
  }

  /* == runs list == */
  const attemptsTitle = (r) => `${num(r.attempts)} attempts started in all; ${num(r.failures || 0)} failed since it was last (re)started, of ${num(r.maxAttempts)} allowed`;
  async function runsPage(qs) {
    const t = token;
    let wf = qs.get('workflow') || '';
    const st = STATES.includes(qs.get('state')) ? qs.get('state') : 'all';
    const group = qs.get('group') || '';
    const dedupe = qs.get('dedupe') || '';
    const order = qs.get('order') === 'asc' ? 'asc' : 'desc';
    const id = qs.get('id') || '';
    // By event (QueueClient.publish): its id, or a name's newest.
    const event = qs.get('event') || '', eventId = qs.get('eventId') || '', byEvent = !id && (event || eventId);
    // A batch run's members (docs/batches.md).
    const batch = !id && !byEvent ? qs.get('batch') || '' : '';
    view.replaceChildren(pageHead('Runs'), h('p', { class: 'empty' }, 'Loading…'));
    if (!wfNames.length) {
      try { const d = await api('api/overview'); wfNames = (d.workflows || []).map((w) => String(w.name)); } catch (e) { if (t === token) loadErr(e, 'workflows'); }
      if (t !== token) return;
    }
    if (!wf) wf = wfNames[0] || '';
    const names = !wf || wfNames.includes(wf) ? wfNames : [wf].concat(wfNames);
    const opts = (list, v) => list.map(([x, tx]) => h('option', { value: x, selected: x === v }, tx));
    const fWf = h('select', { id: 'f-wf', testid: 'filter-workflow' }, opts(names.map((n) => [n, n]), wf));
    const fSt = h('select', { id: 'f-st', testid: 'filter-state' }, opts([['all', 'all states']].concat(STATES.map((x) => [x, x])), st));
    const fGr = h('input', { id: 'f-gr', testid: 'filter-group', type: 'text', value: group, placeholder: 'any group', autocomplete: 'off' });
    const fDd = h('input', { id: 'f-dd', testid: 'filter-dedupe', type: 'text', value: dedupe, placeholder: 'any dedupe key', autocomplete: 'off' });
    const fOr = h('select', { id: 'f-or', testid: 'filter-order' }, opts([['desc', 'newest first'], ['asc', 'oldest first']], order));
    const fId = h('input', { id: 'f-id', testid: 'filter-id', type: 'search', value: id, placeholder: 'exact run id, any workflow', autocomplete: 'off' });
    const fEv = h('input', { id: 'f-ev', testid: 'filter-event', type: 'search', value: event, placeholder: 'any event' });
    const fEi = h('input', { id: 'f-ei', testid: 'filter-event-id', type: 'search', value: eventId, placeholder: 'event id' });
    const fBa = h('input', { id: 'f-ba', testid: 'filter-batch', type: 'search', value: batch, placeholder: 'its members', autocomplete: 'off' });
    const form = h('form', {
      class: 'filters', role: 'search', 'aria-label': 'Filter runs',
      onsubmit: (e) => { e.preventDefault(); go(runsRoute({ workflow: fWf.value, state: fSt.value, group: fGr.value.trim(), dedupe: fDd.value.trim(), order: fOr.value, id: fId.value.trim(), event: fEv.value.trim(), eventId: fEi.value.trim(), batch: fBa.value.trim() })); },
    },
    h('label', { for: 'f-wf' }, 'Workflow', fWf), h('label', { for: 'f-st' }, 'State', fSt), h('label', { for: 'f-gr' }, 'Group', fGr),
    h('label', { for: 'f-dd' }, 'Dedupe key', fDd),
    h('label', { for: 'f-or' }, 'Order', fOr), h('label', { for: 'f-id' }, 'Run id', fId),
    h('label', { for: 'f-ev' }, 'Event', fEv), h('label', { for: 'f-ei' }, 'Event id', fEi), h('label', { for: 'f-ba' }, 'Batch', fBa),
    h('button', { type: 'submit', class: 'btn btn-primary', testid: 'filter-apply' }, 'Apply'));
    const out = h('div', null, h('p', { class: 'empty' }, 'Loading…'));
    view.replaceChildren(pageHead('Runs', refreshBtn()), form, out);
    if (!wf && !id && !byEvent && !batch) { swap(out, h('p', { class: 'empty' }, 'No workflows found, so there are no runs to list.')); return; }
    const stack = [];
    let cursor = null;
    let nextCursor = null;
    setView(async () => {
      const p = new URLSearchParams(id ? { id } : byEvent ? { event, eventId, limit: '200' } : batch ? { batch, limit: '50' } : { workflow: wf, state: st, order, limit: '50' });
      const plain = !id && !byEvent && !batch;
      if (group && plain) p.set('group', group);
      if (dedupe && plain) p.set('dedupe', dedupe);
      if (cursor) p.set('cursor', cursor);
      const d = await load(t, 'api/runs?' + p.toString(), 'runs', out);
      if (!d) return;
      nextCursor = d.cursor || null;
      const runs = Array.isArray(d.runs) ? d.runs : [];
      const cols = [['ID'], ['Workflow'], ['State'], ['Group'], ['Dedupe', '', 'dedupe key, mode and the enqueues folded into the run'], ['Event', null, 'what started it'], ['Attempts', 'n', 'attempts started in all (hover a row for how many failed)'], ['Created'], ['Finished'], ['Input'], ['Error']];
      const what = byEvent ? `runs of event “${eventId || event}”` : batch ? `members of batch “${batch}”` : `${st === 'all' ? '' : st + ' '}runs of “${wf}”${group ? ` in group “${group}”` : ''}${dedupe ? ` with dedupe key “${dedupe}”` : ''}`;
      swap(out, [
        d.completedUnlisted ? h('p', { class: 'note', testid: 'completed-note' },
          `Completed runs of “${wf}” are listed once they complete while a dashboard is open (it records them for 15 minutes after its last read): none has yet. To list every completed run, set @Workflow('${wf}', { indexCompleted: true }).`) : null,
        runs.length
          ? h('div', { class: 'tbl-wrap' }, h('table', { class: 'tbl', testid: 'runs-table' },
            thead(cols),
            h('tbody', null, runs.map((r) => {
              const inp = str(r.input);
              return h('tr', { testid: 'run-row', 'data-run': r.id, 'data-state': r.state },
                h('td', { class: 'code' }, h('a', { href: '#/runs/' + enc(r.id), testid: 'run-link' }, String(r.id))),
                h('td', { class: 'brk' }, String(r.workflow)),
                h('td', null, badge(r.state)),
                h('td', { class: 'code' }, r.group != null ? String(r.group) : dash()),
                h('td', { class: 'code', testid: 'run-row-dedupe' }, r.dedupe ? dedupeText(r.dedupe, wf) : dash()),
                h('td', { class: 'code' }, r.event ? eventLink(r.event) : dash()),
                h('td', { class: 'n', title: attemptsTitle(r) }, num(r.attempts)),
                h('td', null, tm(r.createdAt)), h('td', null, tm(r.finishedAt)),
                h('td', { class: 'code wrapcell', title: inp }, trunc(inp, 80)),
                h('td', { class: 'wrapcell errcell' }, r.error ? [h('strong', null, String(r.error.name || 'Error')), ': ', trunc(String(r.error.message || ''), 160)] : dash()));
            }))))
          : h('p', { class: 'empty', testid: 'runs-empty' }, id ? `No run “${id}” (it never existed, or its retention expired).` : `No ${what}${stack.length ? ' on this page' : ''}.`),
        id || byEvent ? null : pager(stack.length && (() => { cursor = stack.pop(); refreshNow(); }), `Page ${stack.length + 1} · ${order === 'asc' ? 'oldest' : 'newest'} first`,
          nextCursor && (() => { stack.push(cursor); cursor = nextCursor; refreshNow(); })),
      ]);
    }, false);
  }

  // Links to the runs of the event's name, and id.
  const eventLink = (ev) => h('span', { testid: 'run-event' }, h('a', { href: runsRoute({ event: ev.name }) }, String(ev.name)), ' ',
    h('a', { href: runsRoute({ eventId: ev.id }), testid: 'event-id-link', class: 'sub' }, String(ev.id)));

  /* == run detail == */
  function runPage(id) {
    const t = token;
    const box = h('div', null, h('p', { class: 'empty' }, 'Loading…'));
    view.replaceChildren(pageHead(['Run ', h('span', { class: 'code' }, id)]), box);
    setView(async () => {
      let d;
      try { d = await api('api/runs/' + apiSeg(id)); } catch (e) {
        if (t !== token) return;
        if (e.status === 404) {
          cur.poll = false;
          flash(errMsg(e), 'err', 'load');
          swap(box, h('p', { class: 'empty', testid: 'run-missing' }, `Run “${id}” was not found; it may have been removed. `, h('a', { href: '#/runs' }, 'Back to runs')));
        } else loadErr(e, 'run');
        return;
      }
      if (t !== token) return;
      loadOk();
      const r = d.run || {};
      cur.poll = !isDone(r.state);
      swap(box, renderRun(r, d.timeline, box.clientWidth, d.members));
    }, true);
  }
  // A run's dedupe key (a link to the runs with that key), mode and how many enqueues it folded.
  function dedupeText(dd, wf) {
    return [h('a', { href: runsRoute({ workflow: wf, dedupe: String(dd.key) }), testid: 'dedupe-link' }, String(dd.key)),
      ` · ${String(dd.mode)} · ${num(dd.count)} enqueue${dd.count === 1 ? '' : 's'}`];
  }
  function waitText(w) {
    const u = toDate(w.until);
    const ids = Array.isArray(w.runIds) ? w.runIds : [];
    return h('span', { testid: 'run-waiting' }, String(w.kind || 'wait'),
      w.name != null ? ` “${w.name}”` : '', w.key != null ? ` (key ${w.key})` : '',
      w.step != null ? ` at step ${w.step}` : '', u ? [' until ', tm(u)] : '',
      ids.length ? [' on ', ids.map((x, i) => [i ? ', ' : '', h('a', { href: '#/runs/' + enc(x), class: 'code' }, String(x))])] : '');
  }
  function renderRun(r, tl, W, members) {
    const kv = [
      ['Workflow', h('a', { href: runsRoute({ workflow: r.workflow, state: r.state }), testid: 'run-workflow' }, String(r.workflow))],
      ['State', badge(r.state, 'run-state')],
      ['Group', r.group != null ? h('span', { class: 'code' }, String(r.group)) : dash()],
      ['Priority', num(r.priority)],
      ['Attempts', h('span', { testid: 'run-attempts', title: attemptsTitle(r) }, `${num(r.attempts)} started · ${num(r.failures || 0)} of ${num(r.maxAttempts)} allowed failed`,
        r.attempts > r.maxAttempts ? h('span', { class: 'sub muted' }, '(failures count since the last manual retry)') : null)],
      ['Created', tm(r.createdAt)], ['Due', tm(r.dueAt)], ['Started', tm(r.startedAt)], ['Finished', tm(r.finishedAt)],
    ];
    if (r.startedAt && r.finishedAt) kv.push(['Took', fmtDur(toMs(r.finishedAt) - toMs(r.startedAt))]);
    if (r.waitingFor) kv.push(['Waiting for', waitText(r.waitingFor)]);
    if (r.dedupe) {
      const dd = r.dedupe;
      kv.push(['Dedupe', h('span', { testid: 'run-dedupe' }, dedupeText(dd, r.workflow),
        h('span', { class: 'sub muted' }, ` holds the input of enqueue #${num(dd.inputSeq)} of ${num(dd.count)}`))]);
    }
    if (r.event) kv.push(['Event', eventLink(r.event)]);
    // Batches (docs/batches.md): a member links its batch; a batch its members.
    if (r.batch != null) kv.push(['Batch', h('a', { href: '#/runs/' + enc(r.batch), class: 'code', testid: 'run-batch' }, String(r.batch))]);
    if (r.batchOf != null) kv.push(['Members', h('a', { href: runsRoute({ batch: r.id }), testid: 'run-members' }, `${num((members || []).length)} of “${r.batchOf}”`)]);
    const out = [];
    if (!readOnly) {
      const P = 'api/runs/' + apiSeg(r.id) + '/';
      const desc = `run “${r.id}” of “${r.workflow}” (currently ${r.state})`;
      const b = [];
      if (r.state === 'failed' || r.state === 'cancelled') {
        b.push(btn('Retry', 'action-retry', () => act({ title: 'Retry run', ok: 'Retry', path: P + 'retry', text: `Put ${desc} back in the queue so it runs again.` }), 'btn-primary'));
      }
      if (!isDone(r.state)) {
        b.push(btn('Cancel run', 'action-cancel', () => act({ title: 'Cancel run', ok: 'Cancel run', no: 'Keep it', danger: true, path: P + 'cancel', text: `Cancel ${desc}: it will be marked cancelled and no further steps will run.` }), 'btn-danger'));
      }
      if (isDone(r.state)) {
        b.push(btn('Remove', 'action-remove', () => act({
          title: 'Remove run', ok: 'Remove', danger: true, path: P + 'remove',
          text: `Permanently delete ${desc} and its recorded history. This cannot be undone.`,
          after: () => { keepFlash = true; go(runsRoute({ workflow: r.workflow, state: r.state })); },
        }), 'btn-danger'));
      }
      out.push(h('div', { class: 'acts run-acts' }, b));
    }
    out.push(h('section', { class: 'card' }, h('dl', { class: 'kv' }, kv.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v))))));
    out.push(h('section', { class: 'card' }, h('h2', null, 'Step timeline'), timeline(tl, r, W - 34)));
    const blocks = [h('section', { class: 'card' }, h('h2', null, 'Input'), h('pre', { class: 'json', testid: 'run-input' }, shown(r, 'input')))];
    if (r.error) blocks.push(h('section', { class: 'card card-err' }, h('h2', null, 'Error'), h('pre', { class: 'json', testid: 'run-error' }, errText(r.error))));
    if (r.result !== undefined || r.shown?.result !== undefined) blocks.push(h('section', { class: 'card' }, h('h2', null, 'Result'), h('pre', { class: 'json', testid: 'run-result' }, shown(r, 'result'))));
    if (r.progress !== undefined || r.shown?.progress !== undefined) blocks.push(h('section', { class: 'card' }, h('h2', null, 'Progress'), h('pre', { class: 'json', testid: 'run-progress' }, shown(r, 'progress'))));
    out.push(h('div', { class: 'grid2' }, blocks));
    const failed = (tl && Array.isArray(tl.attempts) ? tl.attempts : []).filter((a) => a.error);
    if (failed.length) {
      out.push(h('section', { class: 'card card-err', testid: 'attempt-errors' }, h('h2', null, 'Errors of failed attempts'),
        failed.map((a) => h('div', { class: 'att-err', testid: 'attempt-error', 'data-attempt': a.attempt },
          h('h3', null, `Attempt ${a.attempt}`, h('span', { class: 'sub muted' }, `${fmtTime(a.start)}, after ${fmtDur(a.end - a.start)}`)),
          h('pre', { class: 'json' }, errText(a.error))))));
    }
    return out;
  }
  function errText(e) {
    const head = `${e.name || 'Error'}: ${e.message == null ? '' : e.message}`;
    const stack = e.stack ? String(e.stack) : '';
    return stack.startsWith(head) ? stack : stack ? head + '\n\n' + stack : head;
  }

  function timeline(tl, r, W) {
    const atts = (tl && Array.isArray(tl.attempts) ? tl.attempts : []).slice().sort((a, b) => a.start - b.start);
    if (!atts.length) {
      const why = r.state === 'cancelled' && r.startedAt
        ? `No attempt recorded: it was cancelled while an attempt started at ${fmtTime(r.startedAt)} was running (an attempt is recorded when it ends, and a cancelled one does not end by itself).`
        : r.state === 'active' ? 'The first attempt is running: it is recorded when it ends.'
          : isDone(r.state) ? 'No attempt recorded (it finished before one ended, or its worker keeps no timeline).' : 'No attempts recorded yet.';
      return h('p', { class: 'empty', testid: 'timeline-empty' }, why);
    }
    const now = Date.now();
    const keys = [];
    const idx = new Map();
    let t0 = Infinity;
    let t1 = -Infinity;
    for (const a of atts) {
      t0 = Math.min(t0, a.start);
      t1 = Math.max(t1, a.end);
      for (const c of a.calls || []) {
        if (!idx.has(c.key)) { idx.set(c.key, keys.length); keys.push(c.key); }
        t0 = Math.min(t0, c.start);
        t1 = Math.max(t1, c.end);
      }
    }
    const until = toMs(r.waitingFor && r.waitingFor.until);
    // End of a durable wait: next attempt's start, else finish time, else "now" (or the wake-up time if near).
    const waitEnd = (i, c) => {
      let e;
      if (atts[i + 1]) e = atts[i + 1].start;
      else if (isDone(r.state)) e = toMs(r.finishedAt) || c.end;
      else {
        e = now;
        if (until && until > now && until - now <= Math.max(now - t0, 1000)) e = until;
      }
      return Math.max(e, c.start, c.end);
    };
    atts.forEach((a, i) => { for (const c of a.calls || []) if (c.status === 'waiting') t1 = Math.max(t1, waitEnd(i, c)); });
    if (!(t1 > t0)) t1 = t0 + 1;
    W = Math.max(640, W > 0 ? W : 960);
    const LW = 176;
    const R = 14;
    const TOP = 38;
    const RH = 22;
    const rowsH = Math.max(keys.length, 1) * RH;
    const H = TOP + rowsH + 34;
    const pw = W - LW - R;
    // Idle gaps (backoff, sleeps) far longer than the work are drawn as fixed-width axis breaks.
    const ivs = [];
    for (const a of atts) {
      const e = (a.calls || []).reduce((m, c) => Math.max(m, c.end), a.end);
      const l = ivs[ivs.length - 1];
      if (l && a.start <= l[1]) l[1] = Math.max(l[1], e); else ivs.push([a.start, e]);
    }
    const work = ivs.reduce((n, v) => n + v[1] - v[0], 0);
    const pcs = [];
    let c0 = t0;
    ivs.forEach((v, i) => {
      const b = i + 1 < ivs.length ? ivs[i + 1][0] : t1;
      if (b - v[1] > Math.max(3 * work, 250)) { pcs.push({ a: c0, b: v[1] }, { a: v[1], b, gap: 1 }); c0 = b; }
    });
    if (c0 < t1 || !pcs.length) pcs.push({ a: c0, b: t1 });
    const ng = pcs.filter((p) => p.gap).length;
    const GW = ng ? Math.min(100, (pw * 0.4) / ng) : 0;
    const lin = pcs.reduce((n, p) => n + (p.gap ? 0 : p.b - p.a), 0) || 1;
    let xx = LW;
    for (const p of pcs) { p.x = xx; p.w = p.gap ? GW : ((p.b - p.a) / lin) * (pw - GW * ng); xx += p.w; }
    const X = (tt) => {
      const p = pcs.find((q) => tt <= q.b) || pcs[pcs.length - 1];
      return p.x + (p.b > p.a ? ((Math.min(Math.max(tt, p.a), p.b) - p.a) / (p.b - p.a)) * p.w : 0);
    };
    const svg = s('svg', { class: 'tl', testid: 'timeline', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `Step timeline: ${atts.length} attempt(s), ${keys.length} call(s)` },
      s('title', null, 'Step timeline'),
      s('defs', null, s('pattern', { id: 'tl-hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse', patternTransform: 'rotate(45)' },
        s('rect', { width: 6, height: 6, fill: '#dbe7fe' }), s('line', { x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#2563eb', 'stroke-width': 2.5 }))));
    keys.forEach((k, i) => {
      const y = TOP + i * RH;
      if (i % 2) svg.append(s('rect', { class: 'row-alt', x: 0, y, width: W, height: RH }));
      svg.append(s('text', { class: 'key', x: LW - 8, y: y + RH / 2 + 4, 'text-anchor': 'end' }, trunc(String(k), 26), s('title', null, String(k))));
    });
    for (const p of pcs) {
      if (p.gap) svg.append(s('rect', { class: 'gap', x: p.x, y: TOP - 3, width: p.w, height: rowsH + 6 }, s('title', null, `${fmtDur(p.b - p.a)} with no work (shortened)`)));
    }
    const lanes = [-1e9, -1e9];
    atts.forEach((a) => {
      const x0 = X(a.start);
      const x1 = Math.max(X(a.end), x0 + 1);
      svg.append(s('rect', { class: 'band band-' + cls(a.outcome), x: x0, y: TOP - 3, width: x1 - x0, height: rowsH + 6, 'data-attempt': a.attempt },
        s('title', null, `attempt ${a.attempt}: ${a.outcome}, ${fmtDur(a.end - a.start)} (${fmtTime(a.start)})${a.error ? `\n${a.error.name}: ${a.error.message}` : ''}`)),
      s('line', { class: 'sep', x1: x0, x2: x0, y1: 4, y2: TOP + rowsH + 4 }));
      // Right of its start line, or end-aligned left of it near the right edge.
      const lab = (t) => {
        const est = t.length * 6.8;
        const e = x0 + 3 + est > W - 2;
        return { t, e, l: e ? x0 - 3 - est : x0 + 3, r: e ? x0 - 3 : x0 + 3 + est };
      };
      let L = lab('attempt ' + a.attempt);
      let lane = lanes.findIndex((l) => L.l >= l + 6);
      if (lane < 0) { L = lab('#' + a.attempt); lane = lanes[0] <= lanes[1] ? 0 : 1; }
      svg.append(s('text', { class: 'att', x: L.e ? L.r : L.l, y: 13 + lane * 12, 'text-anchor': L.e ? 'end' : 'start' }, L.t));
      lanes[lane] = L.r;
    });
    atts.forEach((a, i) => {
      for (const c of a.calls || []) {
        const y = TOP + idx.get(c.key) * RH + 4;
        const st = String(c.status);
        let x = X(c.start);
        let w;
        let d;
        let end = c.end;
        const at = { class: `call call-${cls(st)}`, 'data-key': c.key, 'data-status': st, 'data-attempt': a.attempt, rx: 2, y, height: RH - 8 };
        if (st === 'replayed') {
          x -= 1.5; w = 3; at.y = y - 2; at.height = RH - 4; d = '~0 ms (memoized)';
        } else {
          if (st === 'waiting') {
            end = waitEnd(i, c);
            at.fill = 'url(#tl-hatch) #bfd3fb';
          }
          // A failed call is often a sliver of a long attempt: drawn at least 8 px wide, so it can be seen and pointed at.
          w = Math.max(X(end) - x, st === 'failed' ? 8 : 2);
          d = fmtDur(end - c.start) + (st === 'waiting' && !atts[i + 1] && !isDone(r.state) ? (end > now ? ' (until the planned wake-up)' : ' so far') : '');
        }
        at.x = x.toFixed(1);
        at.width = w.toFixed(1);
        const why = st === 'failed' && a.error ? `\n${a.error.name}: ${trunc(String(a.error.message), 300)}` : '';
        svg.append(s('rect', at, s('title', null, `${c.key} (${c.kind || 'call'})\nattempt ${a.attempt} · ${st} · ${d}${why}`)));
      }
    });
    if (!isDone(r.state) && now > t0 && now <= t1) {
      const xn = X(now);
      svg.append(s('line', { class: 'now', x1: xn, x2: xn, y1: TOP - 3, y2: TOP + rowsH + 3 }, s('title', null, 'now')));
    }
    const ya = TOP + rowsH + 8;
    const tick = (x, label, anchor) => svg.append(s('line', { class: 'axis', x1: x, x2: x, y1: ya, y2: ya + 4 }),
      s('text', { class: 'tick', x, y: ya + 16, 'text-anchor': anchor }, label));
    pcs.forEach((p, i) => {
      const xe = p.x + p.w;
      if (p.gap) {
        const t = `⋯ ${fmtDur(p.b - p.a)} later`;
        svg.append(s('text', { class: 'gap-t', x: p.x + p.w / 2, y: ya + 4, 'text-anchor': 'middle' }, t.length * 6 < p.w - 6 ? t : '⋯'));
        if (i === pcs.length - 1) tick(xe, clock(p.b), 'end');
        return;
      }
      svg.append(s('line', { class: 'axis', x1: p.x, x2: xe, y1: ya, y2: ya }));
      if (!ng) {
        for (let k = 0; k <= 4; k++) tick(LW + (pw * k) / 4, k ? '+' + fmtDur(((t1 - t0) * k) / 4) : fmtTime(t0), k === 0 ? 'start' : k === 4 ? 'end' : 'middle');
        return;
      }
      // With breaks: clock time at each stretch's start, time elapsed at its end.
      tick(p.x, i ? clock(p.a) : fmtTime(t0), 'start');
      if (p.w >= 120) tick(xe, '+' + fmtDur(p.b - p.a), 'end');
    });
    svg.append(s('text', { class: 'axis-title', x: LW - 8, y: ya + 16, 'text-anchor': 'end' }, 'time'));
    const more = atts.filter((a) => a.more > 0);
    return [svg,
      h('ul', { class: 'legend', testid: 'timeline-legend' },
        [['ok', 'ok'], ['failed', 'failed'], ['interrupted', 'interrupted'], ['replayed', 'replayed (memoized)'], ['waiting', 'waiting (durable wait)'], ['band', 'attempt']]
          .map(([k, tx]) => h('li', null, h('span', { class: 'sw sw-' + k, 'aria-hidden': 'true' }), tx))),
      more.length ? h('p', { class: 'note' }, more.map((a) => `attempt ${a.attempt}: ${num(a.more)} more calls not shown`).join('; ')) : null];
  }

  /* == schedules == */
  function schedulesPage(qs) {
    const t = token;
    // A workflow's schedules (asked of the server), and cron or interval ones (of the page shown).
    const wf = qs.get('workflow') || '';
    const kind = ['cron', 'every'].includes(qs.get('kind')) ? qs.get('kind') : '';
    const fWf = h('input', { id: 's-wf', testid: 'schedule-filter-workflow', type: 'search', value: wf, placeholder: 'any workflow', autocomplete: 'off' });
    const fKind = h('select', { id: 's-kind', testid: 'schedule-filter-kind' },
      [['', 'cron and interval'], ['cron', 'cron'], ['every', 'interval (every)']].map(([x, tx]) => h('option', { value: x, selected: x === kind }, tx)));
    const form = h('form', {
      class: 'filters', role: 'search', 'aria-label': 'Filter schedules',
      onsubmit: (e) => {
        e.preventDefault();
        const p = new URLSearchParams();
        if (fWf.value.trim()) p.set('workflow', fWf.value.trim());
        if (fKind.value) p.set('kind', fKind.value);
        go('#/schedules' + (p.toString() ? '?' + p : ''));
      },
    },
    h('label', { for: 's-wf' }, 'Workflow', fWf), h('label', { for: 's-kind' }, 'Kind', fKind),
    h('button', { type: 'submit', class: 'btn btn-primary', testid: 'schedule-filter-apply' }, 'Apply'));
    const out = h('div', null, h('p', { class: 'empty' }, 'Loading…'));
    view.replaceChildren(pageHead('Schedules', refreshBtn()), form, out);
    const stack = [];
    let cursor = null;
    let nextCursor = null;
    setView(async () => {
      const p = new URLSearchParams();
      if (wf) p.set('workflow', wf);
      if (cursor) p.set('cursor', cursor);
      const d = await load(t, 'api/schedules' + (p.toString() ? '?' + p : ''), 'schedules', out);
      if (!d) return;
      nextCursor = d.cursor || null;
      const list = (Array.isArray(d.schedules) ? d.schedules : []).filter((sc) => !kind || (kind === 'every') === (sc.every != null));
      const cols = [['ID'], ['Workflow'], ['When'], ['Status'], ['Next fire'], ['Last fired'], ['Fired / skipped', 'n']];
      if (!readOnly) cols.push(['Actions']);
      const rows = list.map((sc) => {
        const id = String(sc.id);
        const up = (Array.isArray(sc.upcoming) ? sc.upcoming : []).filter((u) => toMs(u) !== toMs(sc.nextFireAt));
        // An interval schedule has `every` (ms) and no cron.
        const when = sc.every != null ? 'every ' + fmtDur(Number(sc.every)) : String(sc.cron);
        const whenSub = sc.every != null ? (sc.offsetMs ? 'offset ' + fmtDur(Number(sc.offsetMs)) : '') : (sc.tz ? String(sc.tz) : '');
        const cells = [
          h('th', { scope: 'row', class: 'code brk' }, id),
          h('td', { class: 'brk' }, String(sc.workflow)),
          h('td', null, h('span', { class: 'code', testid: 'schedule-when' }, when), whenSub ? h('span', { class: 'sub muted' }, whenSub) : ''),
          h('td', null, pausedBadge(sc.paused)),
          h('td', { title: up.length ? 'then:\n' + up.map(fmtTime).join('\n') : null }, tm(sc.nextFireAt, 1),
            up.length ? h('div', { class: 'small muted' }, 'then ', tm(up[0], 1), up.length > 1 ? ' …' : '') : ''),
          h('td', null, tm(sc.lastFireAt, 1), sc.lastRunId ? [' ', h('a', { href: '#/runs/' + enc(sc.lastRunId), class: 'sub', testid: 'schedule-run-link' }, 'run')] : ''),
          h('td', { class: 'n' }, num(sc.fired || 0), h('span', { class: 'muted' }, ' / ', num(sc.skipped || 0))),
        ];
        if (!readOnly) {
          const P = `api/schedules/${apiSeg(id)}/`;
          cells.push(h('td', null, sc.paused
            ? btn('Resume', 'schedule-resume', () => act({ title: 'Resume schedule', ok: 'Resume', path: P + 'resume', text: `Resume schedule “${id}”: it will start runs of “${sc.workflow}” again (${when}).` }))
            : btn('Pause', 'schedule-pause', () => act({ title: 'Pause schedule', ok: 'Pause', path: P + 'pause', text: `Pause schedule “${id}”: it will not start any runs of “${sc.workflow}” until it is resumed.` }))));
        }
        return h('tr', { testid: 'schedule-row', 'data-schedule': id, class: sc.paused ? 'is-paused' : null }, cells);
      });
      swap(out, [
        list.length
          ? h('div', { class: 'tbl-wrap' }, h('table', { class: 'tbl', testid: 'schedules-table' },
            thead(cols), h('tbody', null, rows)))
          : h('p', { class: 'empty', testid: 'schedules-empty' }, wf || kind ? 'No schedule matches the filter on this page.' : 'No schedules.'),
        pager(stack.length && (() => { cursor = stack.pop(); refreshNow(); }), `Page ${stack.length + 1}`,
          nextCursor && (() => { stack.push(cursor); cursor = nextCursor; refreshNow(); })),
      ]);
    }, false);
  }

  window.addEventListener('hashchange', route);
  route();
})();
