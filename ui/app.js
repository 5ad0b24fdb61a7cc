// floodgate dashboard. Plain JavaScript, no dependencies, nothing fetched
// but this server's own routes:
//   GET  /v1/admin/stats        the last 15 minutes per rule, alerts, store, connections
//   GET  /v1/admin/events       Server-Sent Events (read with fetch, so the
//                               Authorization header can be sent), once a second
//   GET  /v1/admin/top          top subjects per rule
//   GET|DELETE /v1/admin/subjects/{rule}/{key}, PUT|DELETE /v1/admin/blocks/{key},
//   PUT|DELETE /v1/admin/overrides/{rule}/{key}   drill-down and actions
//   GET  /v1/admin/blocks, PUT|DELETE /v1/admin/blocks/cidr/{addr}/{len}
//                               every block in force; networks blocked and lifted
//   POST /v1/admin/simulate     replay a log through a rule
//   GET  /v1/rules              rule definitions (for the chart captions)
// The admin token lives in sessionStorage (this tab only). Every DOM node is
// built with createElement and textContent: keys are untrusted text.
'use strict';

(() => {
  const WINDOW_S = 900;
  const TOKEN_KEY = 'floodgate.token';
  const THEME_KEY = 'floodgate.theme';
  const MAX_ALERTS = 100;
  const TOP_REFRESH_MS = 5000;
  const SVG_NS = 'http://www.w3.org/2000/svg';

  // ---------------------------------------------------------------- helpers

  const $ = (id) => document.getElementById(id);

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  function svg(tag, attrs) {
    const el = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
    return el;
  }

  const numberFormat = new Intl.NumberFormat();
  const fmt = (n) => (n === null || n === undefined ? '–' : numberFormat.format(n));

  // Exact: 4,088 KiB rather than a rounded 4 MiB.
  function fmtBytes(n) {
    if (n >= 1048576 && n % 1048576 === 0) return fmt(n / 1048576) + ' MiB';
    if (n >= 1024 && n % 1024 === 0) return fmt(n / 1024) + ' KiB';
    return fmt(n) + ' bytes';
  }

  function fmtCompact(n) {
    if (n >= 1e9) return (n / 1e9).toFixed(n >= 1e10 ? 0 : 1) + 'G';
    if (n >= 1e6) return (n / 1e6).toFixed(n >= 1e7 ? 0 : 1) + 'M';
    if (n >= 1e4) return (n / 1e3).toFixed(n >= 1e5 ? 0 : 1) + 'k';
    return fmt(n);
  }

  function fmtDuration(ms) {
    if (ms === null || ms === undefined) return '–';
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min' + (s % 60 && m < 10 ? ' ' + (s % 60) + ' s' : '');
    const hr = Math.floor(m / 60);
    if (hr < 48) return hr + ' h' + (m % 60 ? ' ' + (m % 60) + ' min' : '');
    return Math.floor(hr / 24) + ' d' + (hr % 24 ? ' ' + (hr % 24) + ' h' : '');
  }

  function fmtPeriod(ms) {
    const units = [[86400000 * 7, 'week'], [86400000, 'day'], [3600000, 'hour'],
      [60000, 'minute'], [1000, 'second']];
    for (const [size, name] of units) {
      if (ms % size === 0) {
        const n = ms / size;
        return n === 1 ? name : n + ' ' + name + 's';
      }
    }
    return ms + ' ms';
  }

  const pad2 = (n) => String(n).padStart(2, '0');
  function fmtClock(ms) {
    const d = new Date(ms);
    return pad2(d.getHours()) + ':' + pad2(d.getMinutes()) + ':' + pad2(d.getSeconds());
  }
  function fmtDateTime(ms) {
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad2(d.getMonth() + 1) + '-' + pad2(d.getDate()) + ' ' +
      fmtClock(ms);
  }
  const pct = (part, whole) => (whole > 0 ? (100 * part / whole).toFixed(1) + ' %' : '–');
  const sum = (a) => a.reduce((x, y) => x + y, 0);
  const enc = encodeURIComponent;
  const isHashed = (key) => typeof key === 'string' && key.startsWith('sha256:');
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const mag = Math.pow(10, Math.floor(Math.log10(v)));
    for (const step of [1, 2, 2.5, 5, 10]) {
      if (step * mag >= v) return step * mag;
    }
    return 10 * mag;
  }

  // ------------------------------------------------------------------ theme

  const THEMES = ['auto', 'light', 'dark'];
  function applyTheme(theme) {
    if (theme === 'auto') document.documentElement.removeAttribute('data-theme');
    else document.documentElement.setAttribute('data-theme', theme);
    const label = theme[0].toUpperCase() + theme.slice(1);
    $('theme-text').textContent = label;
    $('theme').setAttribute('aria-label', 'Colour theme: ' + label + ' (change)');
  }
  function initTheme() {
    let theme = 'auto';
    try { theme = localStorage.getItem(THEME_KEY) || 'auto'; } catch (e) { /* private mode */ }
    if (!THEMES.includes(theme)) theme = 'auto';
    applyTheme(theme);
    $('theme').addEventListener('click', () => {
      theme = THEMES[(THEMES.indexOf(theme) + 1) % THEMES.length];
      try { localStorage.setItem(THEME_KEY, theme); } catch (e) { /* private mode */ }
      applyTheme(theme);
    });
  }

  // ------------------------------------------------------------- API access

  const auth = {
    token: '',
    // Whether reads worked without a token (a loopback client of a server
    // with no admin token: writes work too).
    openWithoutToken: false,
  };

  function loadToken() {
    try { auth.token = sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { auth.token = ''; }
  }

  function headers(extra) {
    const out = Object.assign({}, extra);
    if (auth.token) out.Authorization = 'Bearer ' + auth.token;
    return out;
  }

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail || ('HTTP ' + status));
      this.status = status;
    }
  }

  async function api(path, { method = 'GET', body, json, signal } = {}) {
    const init = { method, headers: headers({ Accept: 'application/json' }), cache: 'no-store',
      signal };
    if (json !== undefined) {
      init.body = JSON.stringify(json);
      init.headers['Content-Type'] = 'application/json';
    } else if (body !== undefined) {
      init.body = body;
      init.headers['Content-Type'] = 'text/plain';
    }
    const res = await fetch(path, init);
    const text = await res.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!res.ok) {
      const detail = data && (data.detail || data.title);
      throw new ApiError(res.status, detail || res.statusText || ('HTTP ' + res.status));
    }
    return data;
  }

  const needsToken = (e) => e instanceof ApiError && (e.status === 401 || e.status === 403);

  // ------------------------------------------------------------------ state

  const state = {
    // name -> {admitted[], denied[], shadow[], endSec, updates, leases, inFlight}; a
    // concurrency rule (leases) keeps its acquired and refused in admitted and denied.
    rules: new Map(),
    ruleInfo: {},         // name -> /v1/rules entry
    alerts: [],
    loaded: false,        // the stats were read with the access they need
    simulate: undefined,  // what POST /v1/admin/simulate takes (null: nothing)
    version: '',
    uptimeS: null,
    uptimeAt: 0,
    store: null,
    connections: null,
    locked: false,
    statsMissing: false,
    subject: null,        // {rule, key}
    topRows: [],
    defaultRulePicked: false,
  };

  function ruleSeries(name) {
    let r = state.rules.get(name);
    if (!r) {
      r = { admitted: [], denied: [], shadow: [], endSec: null, updates: 0, leases: false,
        inFlight: 0 };
      state.rules.set(name, r);
    }
    return r;
  }

  // Loads whole arrays from /v1/admin/stats. Their last element is the
  // current, partial second: it is dropped, the stream's next event brings
  // that second whole.
  function takeStats(stats) {
    const nowSec = Math.floor(stats.now_ms / 1000);
    const seen = new Set();
    for (const r of stats.rules || []) {
      seen.add(r.rule);
      const s = ruleSeries(r.rule);
      const cut = (a) => (Array.isArray(a) ? a.slice(0, Math.max(0, a.length - 1)) : []);
      s.leases = Array.isArray(r.acquired);
      s.admitted = cut(s.leases ? r.acquired : r.admitted);
      s.denied = cut(s.leases ? r.refused : r.denied);
      s.shadow = cut(r.shadow_denied);
      s.inFlight = r.in_flight || 0;
      const n = Math.max(s.admitted.length, s.denied.length);
      for (const a of [s.admitted, s.denied, s.shadow]) while (a.length < n) a.unshift(0);
      s.endSec = nowSec - 1;
      s.updates += 1;
    }
    for (const name of [...state.rules.keys()]) if (!seen.has(name)) state.rules.delete(name);
    state.alerts = (stats.alerts || []).slice(0, MAX_ALERTS);
    state.loaded = true;
    state.simulate = stats.simulate === undefined ? undefined : stats.simulate;
    state.version = stats.version || '';
    state.uptimeS = stats.uptime_s;
    state.uptimeAt = Date.now();
    state.store = stats.store || null;
    state.connections = stats.connections || null;
    state.priorities = stats.priorities || [];
  }

  // One second's counts from the stream (`now_ms` is in the second after it).
  function takeSecond(ev) {
    const sec = Math.floor(ev.now_ms / 1000) - 1;
    for (const r of ev.rules || []) {
      const s = ruleSeries(r.rule);
      s.leases = r.acquired !== undefined;
      if (s.leases) s.inFlight = r.in_flight || 0;
      const values = s.leases ? [r.acquired || 0, r.refused || 0, 0]
        : [r.admitted || 0, r.denied || 0, r.shadow_denied || 0];
      const arrays = [s.admitted, s.denied, s.shadow];
      if (s.endSec === null) {
        arrays.forEach((a, i) => a.push(values[i]));
        s.endSec = sec;
      } else if (sec <= s.endSec) {
        const back = s.endSec - sec;
        arrays.forEach((a, i) => {
          if (back < a.length) a[a.length - 1 - back] = values[i];
        });
      } else {
        const gap = Math.min(sec - s.endSec - 1, WINDOW_S);
        arrays.forEach((a, i) => {
          for (let g = 0; g < gap; g++) a.push(0);
          a.push(values[i]);
        });
        s.endSec = sec;
      }
      for (const a of arrays) if (a.length > WINDOW_S) a.splice(0, a.length - WINDOW_S);
      s.updates += 1;
    }
    if (ev.store) state.store = ev.store;
    if (ev.connections) state.connections = ev.connections;
  }

  // ------------------------------------------------------------------ chart

  // What a rule's two counts are called: a rate rule's decisions, a
  // concurrency rule's acquisitions.
  const DECISION_WORDS = ['admitted', 'denied'];
  const LEASE_WORDS = ['acquired', 'refused'];

  // A chart of admitted and denied (two areas, denied in front) and
  // shadow-denied (a dashed line) per step; `bars` draws stacked bars
  // instead (admitted below, denied above: the bar is every event). The SVG stretches
  // to its box; lines keep their width (non-scaling strokes).
  class Chart {
    constructor(container, { bars = false, label }) {
      this.bars = bars;
      this.label = label;  // index -> text for the readout
      this.words = DECISION_WORDS;  // what the two counts are called
      this.W = 1000;
      this.H = 100;
      this.plot = h('div', { class: 'plot' });
      this.svg = svg('svg', { viewBox: `0 0 ${this.W} ${this.H}`, preserveAspectRatio: 'none',
        role: 'img' });
      for (const f of [0.5]) {
        this.svg.append(svg('line', { class: 'grid', x1: 0, x2: this.W, y1: this.H * f,
          y2: this.H * f, 'vector-effect': 'non-scaling-stroke' }));
      }
      const ns = { 'vector-effect': 'non-scaling-stroke' };
      if (bars) {
        this.admittedEl = svg('path', Object.assign({ class: 'bar-admitted' }, ns));
        this.deniedEl = svg('path', Object.assign({ class: 'bar-denied' }, ns));
      } else {
        this.admittedEl = svg('path', Object.assign({ class: 'area-admitted' }, ns));
        this.deniedEl = svg('path', Object.assign({ class: 'area-denied' }, ns));
      }
      this.shadowEl = svg('path', Object.assign({ class: 'line-shadow' }, ns));
      this.cursor = svg('line', Object.assign({ class: 'cursor', y1: 0, y2: this.H,
        visibility: 'hidden' }, ns));
      this.svg.append(this.admittedEl, this.deniedEl, this.shadowEl, this.cursor);
      this.yTop = h('span', { class: 'y-label y-top' });
      this.yMid = h('span', { class: 'y-label y-mid' });
      this.plot.append(this.svg, this.yTop, this.yMid);
      this.readout = h('div', { class: 'chart-readout', 'aria-live': 'off' });
      this.xLabels = h('div', { class: 'x-labels', 'aria-hidden': 'true' });
      container.append(this.plot, this.xLabels, this.readout);
      this.data = { admitted: [], denied: [], shadow: [] };
      this.hover = null;
      this.plot.addEventListener('pointermove', (e) => this.onPointer(e));
      this.plot.addEventListener('pointerleave', () => { this.hover = null; this.drawCursor(); });
    }

    setXLabels(labels) {
      this.xLabels.replaceChildren(...labels.map((t) => h('span', { text: t })));
    }

    update(admitted, denied, shadow, summary) {
      this.data = { admitted, denied, shadow: shadow || [] };
      this.summary = summary;
      const n = Math.max(admitted.length, 1);
      let peak = 0;
      for (let i = 0; i < admitted.length; i++) {
        const a = admitted[i] || 0, d = denied[i] || 0;
        peak = Math.max(peak, this.bars ? a + d : Math.max(a, d), this.data.shadow[i] || 0);
      }
      const max = niceMax(peak);
      this.max = max;
      this.yTop.textContent = fmtCompact(max);
      this.yMid.textContent = fmtCompact(max / 2);
      const y = (v) => (this.H - (v / max) * this.H).toFixed(2);
      if (this.bars) {
        const w = this.W / n;
        const gap = w > 6 ? w * 0.15 : 0;
        let pa = '', pd = '';
        for (let i = 0; i < admitted.length; i++) {
          const x = (i * w + gap / 2).toFixed(2), bw = (w - gap).toFixed(2);
          const a = admitted[i] || 0, d = denied[i] || 0;
          if (a > 0) pa += `M${x},${y(a)}h${bw}V${this.H}h-${bw}Z`;
          if (d > 0) pd += `M${x},${y(a + d)}h${bw}V${y(a)}h-${bw}Z`;
        }
        this.admittedEl.setAttribute('d', pa);
        this.deniedEl.setAttribute('d', pd);
        this.step = w;
      } else {
        // Both from the baseline, denied over admitted: each reads as its
        // own count.
        const step = n > 1 ? this.W / (n - 1) : this.W;
        const area = (values) => {
          if (!values.length) return '';
          let d = `M0,${this.H}`;
          for (let i = 0; i < values.length; i++) {
            d += `L${(i * step).toFixed(2)},${y(values[i] || 0)}`;
          }
          return d + `L${((values.length - 1) * step).toFixed(2)},${this.H}Z`;
        };
        this.admittedEl.setAttribute('d', area(admitted));
        this.deniedEl.setAttribute('d', denied.some((v) => v > 0) ? area(denied) : '');
        this.step = step;
      }
      const sh = this.data.shadow;
      if (sh.length && sh.some((v) => v > 0)) {
        const step = this.bars ? this.W / n : (n > 1 ? this.W / (n - 1) : this.W);
        const off = this.bars ? step / 2 : 0;
        this.shadowEl.setAttribute('d',
          sh.map((v, i) => `${i ? 'L' : 'M'}${(i * step + off).toFixed(2)},${y(v)}`).join(''));
      } else {
        this.shadowEl.setAttribute('d', '');
      }
      this.drawCursor();
    }

    onPointer(e) {
      const box = this.plot.getBoundingClientRect();
      const n = this.data.admitted.length;
      if (!n || box.width <= 0) return;
      const f = Math.min(Math.max((e.clientX - box.left) / box.width, 0), 1);
      this.hover = this.bars ? Math.min(n - 1, Math.floor(f * n)) : Math.round(f * (n - 1));
      this.drawCursor();
    }

    drawCursor() {
      const n = this.data.admitted.length;
      if (this.hover === null || this.hover >= n) {
        this.cursor.setAttribute('visibility', 'hidden');
        this.readout.textContent = this.summary || '';
        return;
      }
      const i = this.hover;
      const x = this.bars ? (i + 0.5) * this.step : i * this.step;
      this.cursor.setAttribute('x1', x.toFixed(2));
      this.cursor.setAttribute('x2', x.toFixed(2));
      this.cursor.setAttribute('visibility', 'visible');
      const sh = this.data.shadow[i];
      const [yes, no] = this.words;
      this.readout.textContent = `${this.label(i)}: ${fmt(this.data.admitted[i] || 0)} ${yes}, ` +
        `${fmt(this.data.denied[i] || 0)} ${no}` + (sh ? `, ${fmt(sh)} shadow denied` : '');
    }
  }

  // ------------------------------------------------------------ rule cards

  const cards = new Map();  // rule -> {el, chart, totals, sub}

  function ruleCaption(name) {
    const info = state.ruleInfo[name];
    if (!info) return '';
    const parts = [info.algorithm];
    if (info.limits) parts.push(info.limits.join(', '));
    else if (info.max_in_flight !== undefined) parts.push(info.max_in_flight + ' in flight');
    if (info.shadow) parts.push('shadow');
    return parts.filter(Boolean).join(' · ');
  }

  function renderCharts() {
    const box = $('charts');
    const names = [...state.rules.keys()].sort();
    for (const [name, card] of cards) {
      if (!state.rules.has(name)) { card.el.remove(); cards.delete(name); }
    }
    if (!names.length) {
      if (!box.querySelector('.empty')) {
        box.replaceChildren(h('p', { class: 'empty', text: state.locked
          ? 'Enter the admin token (or the read token) in the header to see the rules.'
          : 'No rules yet.' }));
      }
      return;
    }
    box.querySelector(':scope > .empty')?.remove();
    let allAdmitted = 0, allDenied = 0;
    names.forEach((name, order) => {
      const s = state.rules.get(name);
      let card = cards.get(name);
      if (!card) {
        const title = h('span', { class: 'chart-title', text: name });
        const sub = h('span', { class: 'chart-sub' });
        const totals = h('div', { class: 'chart-totals' });
        const chartBox = h('div', { class: 'chart' });
        const el = h('article', { class: 'chart-card', 'data-rule': name,
          'aria-label': 'Rule ' + name },
        h('div', { class: 'chart-head' }, title, sub), totals, chartBox);
        const chart = new Chart(chartBox, { label: (i) => {
          const cur = state.rules.get(name);
          const sec = cur.endSec - (cur.admitted.length - 1 - i);
          return fmtClock(sec * 1000);
        } });
        chart.setXLabels(['15 min ago', '10 min', '5 min', 'now']);
        card = { el, chart, totals, sub };
        cards.set(name, card);
      }
      if (box.children[order] !== card.el) box.insertBefore(card.el, box.children[order] || null);
      card.sub.textContent = ruleCaption(name);
      const a = sum(s.admitted), d = sum(s.denied), sh = sum(s.shadow);
      const [yes, no] = s.leases ? LEASE_WORDS : DECISION_WORDS;
      // The facts are decisions: a concurrency rule's leases are its own.
      if (!s.leases) {
        allAdmitted += a;
        allDenied += d;
      }
      card.totals.replaceChildren(...[
        h('span', {}, h('span', { class: 'admitted', text: fmt(a) }), ' ' + yes),
        h('span', {}, h('span', { class: 'denied', text: fmt(d) }), ' ' + no),
        d ? h('span', { class: 'muted', text: pct(d, a + d) }) : null,
        sh ? h('span', { class: 'muted', text: fmt(sh) + ' shadow' }) : null,
        s.leases ? h('span', { class: 'in-flight' }, h('strong', { text: fmt(s.inFlight) }),
          ' in flight') : null,
      ].filter(Boolean));
      const last = s.admitted.length - 1;
      const summary = last >= 0
        ? `Last second: ${fmt(s.admitted[last])} ${yes}, ${fmt(s.denied[last])} ${no}`
        : 'Waiting for data';
      card.chart.words = s.leases ? LEASE_WORDS : DECISION_WORDS;
      card.chart.update(s.admitted, s.denied, s.shadow, summary);
      card.el.dataset.updates = String(s.updates);
      card.el.dataset.points = String(s.admitted.length);
      card.el.dataset.kind = s.leases ? 'leases' : 'decisions';
      card.el.dataset.denied = String(d);
      if (s.leases) card.el.dataset.inFlight = String(s.inFlight);
    });
    $('fact-admitted').textContent = fmtCompact(allAdmitted);
    $('fact-denied').textContent = fmtCompact(allDenied);
  }

  // ----------------------------------------------------------- facts, health

  function renderFacts() {
    $('fact-version').textContent = state.version || '–';
    if (state.uptimeS !== null && state.uptimeS !== undefined) {
      $('fact-uptime').textContent =
        fmtDuration(state.uptimeS * 1000 + (Date.now() - state.uptimeAt));
    }
    const st = state.store;
    let storeText = '–';
    if (st) {
      storeText = st.kind === 'redis' ? (st.healthy === false ? 'Redis, unhealthy' : 'Redis')
        : st.kind === 'memory' ? 'Embedded' : String(st.kind);
    }
    $('fact-store').textContent = storeText;
  }

  const CIRCUIT_CLASS = { closed: 'ok', half_open: 'warn', open: 'bad' };

  function renderStore() {
    const box = $('store');
    const st = state.store;
    if (!st) {
      box.replaceChildren(h('p', { class: 'empty', text: 'No store information.' }));
      return;
    }
    if (st.kind !== 'redis') {
      box.replaceChildren(h('p', { class: 'store-line' },
        h('span', { class: 'tag ok', text: 'healthy' }),
        'Embedded store (in this process): no network, nothing to fail over.'));
      return;
    }
    const healthy = st.healthy !== false;
    const nodes = st.nodes || [];
    const rows = nodes.map((n) => h('tr', {},
      h('td', { class: 'mono', text: n.address }),
      h('td', {}, h('span', { class: 'tag ' + (CIRCUIT_CLASS[n.circuit] || ''),
        text: String(n.circuit || '–').replace('_', ' ') })),
      h('td', { class: 'num', text: n.latency_ms === null || n.latency_ms === undefined
        ? '–' : Number(n.latency_ms).toFixed(n.latency_ms < 10 ? 2 : 0) + ' ms' })));
    box.replaceChildren(
      h('p', { class: 'store-line' },
        h('span', { class: 'tag ' + (healthy ? 'ok' : 'bad'),
          text: healthy ? 'healthy' : 'unhealthy' }),
        `Redis, ${nodes.length} node${nodes.length === 1 ? '' : 's'}`),
      nodes.length ? h('table', { class: 'table compact' },
        h('caption', { class: 'visually-hidden', text: 'Redis nodes' }),
        h('thead', {}, h('tr', {}, h('th', { scope: 'col', text: 'Node' }),
          h('th', { scope: 'col', text: 'Circuit' }),
          h('th', { scope: 'col', class: 'num', text: 'Latency' }))),
        h('tbody', {}, rows)) : '');
  }

  // Rules with priorities: each class's share kept back and its decisions.
  // The panel shows only when some rule has classes.
  function renderPriorities() {
    const rows = state.priorities || [];
    $('priorities-panel').hidden = rows.length === 0;
    $('priorities-body').replaceChildren(...rows.map((c) => h('tr', {},
      h('td', { class: 'mono', text: c.rule }),
      h('td', { class: 'mono', text: c.class }),
      h('td', { class: 'num', text: c.keep_percent + ' %' }),
      h('td', { class: 'num', text: fmt(c.admitted) }),
      h('td', { class: 'num' + (c.denied > 0 ? ' bad' : ''), text: fmt(c.denied) }))));
  }

  function renderConnections() {
    const body = $('connections-body');
    const c = state.connections;
    if (!c) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: 3, class: 'muted', text: '–' })));
      return;
    }
    const names = { http: 'HTTP', resp: 'Redis protocol', grpc: 'gRPC' };
    body.replaceChildren(...Object.entries(c).map(([k, v]) => h('tr', {},
      h('td', { text: names[k] || k }),
      h('td', { class: 'num', text: fmt(v && v.open) }),
      h('td', { class: 'num', text: fmt(v && v.accepted) }))));
  }

  // ------------------------------------------------------------------ alerts

  function alertItem(a, fresh) {
    const threshold = Number(a.threshold);
    const cls = threshold >= 100 ? 'full' : threshold >= 80 ? 'near' : '';
    const statusCls = { delivered: 'ok', dropped: 'bad', pending: 'warn', queued: 'warn' };
    return h('li', { class: fresh ? 'fresh' : '' },
      h('span', { class: 'pct ' + cls, text: isNaN(threshold) ? '–' : threshold + ' %' }),
      h('span', { class: 'what' }, h('strong', { text: a.rule }), ' · ',
        h('code', { class: isHashed(a.key) ? 'muted' : '', text: a.key })),
      h('span', { class: 'when', text: a.at ? fmtClock(a.at) : '' }),
      h('span', { class: 'detail' },
        (a.limit ? `${a.limit}: ${fmt(a.used)} of ${fmt(a.capacity)}` : ''),
        a.tier ? ` · tier ${a.tier}` : '',
        a.status ? ' · ' : '',
        a.status ? h('span', { class: 'tag ' + (statusCls[a.status] || ''), text: a.status })
          : null));
  }

  function renderAlerts(freshId) {
    const list = $('alerts');
    list.replaceChildren(...state.alerts.map((a) => alertItem(a, a.event_id === freshId)));
    // "No alerts" only once the server said so: not before the token
    // that lets it say anything.
    showEmpty('alerts-empty', state.alerts.length ? ''
      : state.locked ? 'Enter the admin token (or the read token) in the header to see the alerts.'
        : state.loaded ? 'No alerts yet.' : '');
    $('alerts-count').textContent = state.alerts.length ? state.alerts.length + ' recent' : '';
  }

  function takeAlert(a) {
    if (!a || typeof a !== 'object') return;
    const i = state.alerts.findIndex((x) => x.event_id === a.event_id);
    if (i >= 0) state.alerts.splice(i, 1);
    state.alerts.unshift(a);
    state.alerts.length = Math.min(state.alerts.length, MAX_ALERTS);
    renderAlerts(a.event_id);
  }

  // ----------------------------------------------------------- rule pickers

  function ruleNames() {
    const names = new Set([...state.rules.keys(), ...Object.keys(state.ruleInfo)]);
    return [...names].sort();
  }

  function fillRuleSelect(select, names, label = (n) => n) {
    const current = select.value;
    const same = select.options.length === names.length &&
      names.every((n, i) => select.options[i].value === n);
    if (!same) {
      select.replaceChildren(...names.map((n) => h('option', { value: n, text: label(n) })));
      if (names.includes(current)) select.value = current;
    }
  }

  function renderRulePickers() {
    const names = ruleNames();
    fillRuleSelect($('top-rule'), names);
    fillRuleSelect($('network-block-rule'), ['', ...names], (n) => n || 'every rule');
    renderTopBy();
    renderSimulateLimits();
    if (!state.defaultRulePicked && state.rules.size) {
      // Start on the rule denying the most.
      let best = null, bestDenied = -1;
      for (const [name, s] of state.rules) {
        const d = sum(s.denied);
        if (d > bestDenied) { best = name; bestDenied = d; }
      }
      if (best) $('top-rule').value = best;
      state.defaultRulePicked = true;
    }
  }

  // --------------------------------------------------------------- top list

  // The ranking's words for the chosen rule: a concurrency rule's subjects
  // are refused or acquired (the server takes either word).
  function renderTopBy() {
    const s = state.rules.get($('top-rule').value);
    const words = s && s.leases ? LEASE_WORDS : DECISION_WORDS;
    for (const option of $('top-by').options) {
      option.textContent = option.value === 'admitted' ? words[0] : words[1];
    }
  }

  let topSeq = 0;
  async function loadTop() {
    const rule = $('top-rule').value;
    if (!rule || state.locked) return;
    const by = $('top-by').value;
    const win = document.querySelector('input[name="window"]:checked').value;
    const seq = ++topSeq;
    try {
      const data = await api(`/v1/admin/top?rule=${enc(rule)}&by=${by}&window=${win}&limit=10`);
      if (seq !== topSeq) return;
      renderTop(data, by);
      $('top-updated').textContent = 'updated ' + fmtClock(Date.now());
    } catch (e) {
      if (seq !== topSeq) return;
      if (needsToken(e)) return lock();
      $('top-body').replaceChildren();
      showEmpty('top-empty', e.status === 404 && /no (admin )?route/.test(e.message)
        ? 'This server has no top-subjects route.'
        : 'Could not load the top subjects: ' + e.message);
    }
  }

  function showEmpty(id, text) {
    const el = $(id);
    el.textContent = text;
    el.hidden = !text;
  }

  function renderTop(data, by) {
    const byWord = $('top-by').selectedOptions[0]?.textContent || by;
    const rows = (data && data.subjects) || [];
    state.topRows = rows;
    const max = rows.reduce((m, r) => Math.max(m, r.count || 0), 0);
    const sel = state.subject;
    let hashed = false;
    $('top-body').replaceChildren(...rows.map((r, i) => {
      const hidden = isHashed(r.key);
      hashed = hashed || hidden;
      const selected = sel && !hidden && sel.rule === data.rule && sel.key === r.key;
      const bar = h('span');
      bar.style.width = (max ? (100 * r.count / max) : 0).toFixed(1) + '%';
      return h('tr', { class: selected ? 'selected' : '', 'data-key': r.key, 'data-rank': i + 1 },
        h('td', { class: 'key-cell' }, hidden
          ? h('span', { class: 'hashed', title: 'hashed (redact_keys)', text: r.key })
          : r.key),
        h('td', { class: 'num' }, fmt(r.count),
          r.error ? h('span', { class: 'muted small',
            title: 'may be overcounted by up to this much',
            text: ' ±' + fmt(r.error) }) : null),
        h('td', { class: 'share' }, h('div', { class: 'bar ' + by }, bar)),
        h('td', { class: 'num' }, h('button', { type: 'button', class: 'quiet small inspect',
          disabled: hidden,
          title: hidden ? 'Keys are hashed: type the key below to look it up' : null,
          'aria-label': hidden ? 'Inspect (unavailable for a hashed key)' : 'Inspect ' + r.key,
          onclick: () => openSubject(data.rule, r.key) }, 'Inspect')));
    }));
    $('redacted-note').hidden = !hashed;
    showEmpty('top-empty', rows.length ? ''
      : `No ${byWord} subjects in the last ${data.window || 'window'}.`);
  }

  // ---------------------------------------------------------------- subject

  function canWrite() { return Boolean(auth.token) || auth.openWithoutToken; }

  function setResult(id, text, kind) {
    const el = $(id);
    el.textContent = text;
    if (kind) el.dataset.kind = kind; else delete el.dataset.kind;
  }

  function setActionResult(text, kind) { setResult('action-result', text, kind); }

  // What a refused change is told as.
  const failure = (e) => 'Failed: ' +
    (e.status === 403 ? 'this token may only read (use the admin token)' : e.message);

  async function openSubject(rule, key, { quiet = false } = {}) {
    state.subject = { rule, key };
    $('subject-empty').hidden = true;
    $('subject-body').hidden = false;
    $('subject-close').hidden = false;
    $('subject-rule').textContent = rule;
    $('subject-key').textContent = key;
    if (!quiet) setActionResult('');
    for (const tr of $('top-body').children) {
      tr.classList.toggle('selected', tr.dataset.key === key && $('top-rule').value === rule);
    }
    updateActionAccess();
    const box = $('subject-state');
    if (!quiet) box.replaceChildren(h('p', { class: 'muted', text: 'Loading…' }));
    try {
      const s = await api(`/v1/admin/subjects/${enc(rule)}/${enc(key)}`);
      if (!state.subject || state.subject.key !== key || state.subject.rule !== rule) return;
      renderSubject(s);
    } catch (e) {
      if (needsToken(e) && !auth.token) return lock();
      box.replaceChildren(h('p', { class: 'action-result', 'data-kind': 'error',
        text: 'Could not load this subject: ' + e.message }));
    }
    if (!quiet) $('subject-panel').scrollIntoView({ block: 'nearest', behavior: 'smooth' });
  }

  function renderSubject(s) {
    const items = (s.limits || []).map((l) => {
      const used = l.used, full = used !== null && l.remaining === 0;
      const bar = h('span');
      bar.style.width = (l.limit > 0 && used !== null ? Math.min(100, 100 * used / l.limit) : 0)
        .toFixed(1) + '%';
      return h('li', { class: 'limit-row' + (full ? ' full' : '') },
        h('span', {}, h('strong', { text: fmt(l.limit) }), ' per ', fmtPeriod(l.period_ms)),
        h('span', { class: 'muted', text: used === null ? 'unknown'
          : `${fmt(used)} used · ${fmt(l.remaining)} left` }),
        h('div', { class: 'bar', role: 'meter', 'aria-valuemin': 0, 'aria-valuemax': l.limit,
          'aria-valuenow': used === null ? 0 : used,
          'aria-label': `${fmt(l.limit)} per ${fmtPeriod(l.period_ms)}` }, bar),
        h('span', { class: 'muted small', text: l.reset_after_ms === null ? ''
          : (used ? 'resets in ' + fmtDuration(l.reset_after_ms) : 'fresh') }));
    });
    const parts = [];
    if (s.fallback) {
      parts.push(h('p', { class: 'state-line' }, h('span', { class: 'tag warn', text: 'fallback' }),
        ' ', `the store could not say (${s.fallback})`));
    }
    parts.push(items.length ? h('ul', { class: 'limits' }, items)
      : h('p', { class: 'muted', text: 'No limits to show.' }));
    const o = s.override;
    if (o) {
      parts.push(h('p', { class: 'state-line' }, h('span', { class: 'tag warn', text: 'override' }),
        ' ', (o.limits || []).join(', '),
        o.expires_in_ms === null ? ', until removed' : `, ${fmtDuration(o.expires_in_ms)} left`,
        o.reason ? ` — ${o.reason}` : '', ' ',
        h('button', { type: 'button', class: 'quiet small', disabled: !canWrite(),
          'data-needs-write': '', onclick: () => act('remove-override') }, 'Remove')));
    }
    for (const b of s.blocks || []) {
      parts.push(h('p', { class: 'state-line blocked' },
        h('span', { class: 'tag bad', text: 'blocked' }), ' ',
        b.rule ? `on ${b.rule}` : 'on every rule', `, ${fmtDuration(b.expires_in_ms)} left`,
        b.reason ? ` — ${b.reason}` : '', ' ',
        h('button', { type: 'button', class: 'quiet small', disabled: !canWrite(),
          'data-needs-write': '', onclick: () => act('unblock', b) }, 'Unblock')));
    }
    if (!o && !(s.blocks || []).length) {
      parts.push(h('p', { class: 'state-line muted', text: 'No override, not blocked.' }));
    }
    $('subject-state').replaceChildren(...parts);
  }

  function updateActionAccess() {
    const ok = canWrite();
    $('actions-locked').hidden = ok;
    for (const el of document.querySelectorAll(
      '#subject-actions button, #subject-actions input, #subject-actions select, ' +
      '[data-needs-write]')) {
      el.disabled = !ok;
    }
  }

  async function act(what, extra) {
    const sub = state.subject;
    if (!sub) return;
    const { rule, key } = sub;
    let done;
    try {
      if (what === 'reset') {
        await api(`/v1/admin/subjects/${enc(rule)}/${enc(key)}`, { method: 'DELETE' });
        done = `Reset ${key} on ${rule}.`;
      } else if (what === 'block') {
        const f = $('block-form');
        const ttl = Number(f.elements.ttl.value);
        const body = { ttl_ms: ttl };
        if (f.elements.scope.value === 'rule') body.rule = rule;
        const reason = f.elements.reason.value.trim();
        if (reason) body.reason = reason;
        await api(`/v1/admin/blocks/${enc(key)}`, { method: 'PUT', json: body });
        done = `Blocked ${key} ${body.rule ? 'on ' + rule : 'on every rule'} for ` +
          `${fmtDuration(ttl)}.`;
      } else if (what === 'unblock') {
        const q = extra && extra.rule ? `?rule=${enc(extra.rule)}` : '';
        await api(`/v1/admin/blocks/${enc(key)}${q}`, { method: 'DELETE' });
        done = `Unblocked ${key}.`;
      } else if (what === 'override') {
        const f = $('override-form');
        const limits = f.elements.limits.value.split(/[,\s]+/).filter(Boolean);
        if (!limits.length) throw new Error('give at least one limit, e.g. 600/minute');
        const body = { limits, ttl_ms: Number(f.elements.ttl.value) };
        const reason = f.elements.reason.value.trim();
        if (reason) body.reason = reason;
        await api(`/v1/admin/overrides/${enc(rule)}/${enc(key)}`, { method: 'PUT', json: body });
        done = `Override set: ${limits.join(', ')}.`;
      } else if (what === 'remove-override') {
        await api(`/v1/admin/overrides/${enc(rule)}/${enc(key)}`, { method: 'DELETE' });
        done = 'Override removed.';
      }
      setActionResult(done, 'ok');
    } catch (e) {
      setActionResult(failure(e), 'error');
    }
    await openSubject(rule, key, { quiet: true });
    loadTop();
    loadBlocks();
  }

  // ----------------------------------------------------------------- blocks

  // Every block in force (GET /v1/admin/blocks): a subject's, by its key,
  // or a network's, by the network's text where a key shows.
  let blocksSeq = 0;
  async function loadBlocks() {
    if (state.locked) return;
    const seq = ++blocksSeq;
    try {
      const data = await api('/v1/admin/blocks');
      if (seq !== blocksSeq) return;
      renderBlocks((data && data.blocks) || []);
    } catch (e) {
      if (seq !== blocksSeq) return;
      if (needsToken(e)) return lock();
      $('blocks-list').replaceChildren();
      showEmpty('blocks-empty', 'Could not load the blocks: ' + e.message);
    }
  }

  const blockName = (b) => (typeof b.cidr === 'string' ? b.cidr : b.key);

  function renderBlocks(blocks) {
    const sorted = [...blocks].sort((a, b) => blockName(a).localeCompare(blockName(b)) ||
      (a.rule || '').localeCompare(b.rule || ''));
    $('blocks-list').replaceChildren(...sorted.map((b) => {
      const network = typeof b.cidr === 'string';
      return h('li', { class: 'state-line', 'data-cidr': network ? b.cidr : null,
        'data-key': network ? null : b.key, 'data-rule': b.rule || '' },
        h('span', { class: 'tag' + (network ? ' warn' : ''), text: network ? 'network' : 'key' }),
        ' ', h('code', { class: 'block-name', text: blockName(b) }), ' ',
        b.rule ? `on ${b.rule}` : 'on every rule', `, ${fmtDuration(b.expires_in_ms)} left`,
        b.reason ? ` — ${b.reason}` : '', ' ',
        h('button', { type: 'button', class: 'quiet small', disabled: !canWrite(),
          'data-needs-write': '', onclick: () => unblock(b) }, 'Unblock'));
    }));
    $('blocks-count').textContent = blocks.length ? `${fmt(blocks.length)} in force` : '';
    showEmpty('blocks-empty', blocks.length ? '' : 'Nothing is blocked.');
  }

  // /v1/admin/blocks/{key}, or /v1/admin/blocks/cidr/{addr}/{len} for a
  // network written address/length.
  function blockPath(b) {
    if (typeof b.cidr !== 'string') return `/v1/admin/blocks/${enc(b.key)}`;
    const slash = b.cidr.lastIndexOf('/');
    return `/v1/admin/blocks/cidr/${enc(b.cidr.slice(0, slash))}/${enc(b.cidr.slice(slash + 1))}`;
  }

  async function unblock(b) {
    try {
      await api(blockPath(b) + (b.rule ? `?rule=${enc(b.rule)}` : ''), { method: 'DELETE' });
      setResult('blocks-result', `Unblocked ${blockName(b)}.`, 'ok');
    } catch (e) {
      setResult('blocks-result', failure(e), 'error');
    }
    await loadBlocks();
    if (state.subject) openSubject(state.subject.rule, state.subject.key, { quiet: true });
  }

  async function blockNetwork() {
    const f = $('network-block-form');
    const text = f.elements.network.value.trim();
    const slash = text.lastIndexOf('/');
    try {
      if (slash <= 0 || slash === text.length - 1) {
        throw new Error('write the network as address/length, e.g. 203.0.113.0/24');
      }
      const ttl = Number(f.elements.ttl.value);
      const body = { ttl_ms: ttl };
      if (f.elements.rule.value) body.rule = f.elements.rule.value;
      const reason = f.elements.reason.value.trim();
      if (reason) body.reason = reason;
      const made = await api(blockPath({ cidr: text }), { method: 'PUT', json: body });
      setResult('blocks-result', `Blocked ${made.cidr} ${body.rule ? 'on ' + body.rule
        : 'on every rule'} for ${fmtDuration(ttl)}.`, 'ok');
      f.elements.network.value = '';
    } catch (e) {
      setResult('blocks-result', failure(e), 'error');
    }
    await loadBlocks();
  }

  // --------------------------------------------------------------- simulate

  // What the server's simulate route takes, as its stats say: the rules it
  // replays and the largest log.
  function renderSimulateLimits() {
    const sim = state.simulate;
    fillRuleSelect($('sim-rule'), sim ? [...sim.rules].sort() : []);
    $('sim-limit').textContent = sim ? ` Up to ${fmtBytes(sim.max_body_bytes)}.` : '';
    if (sim === null) {
      $('sim-run').disabled = true;
      $('sim-status').textContent = 'This server cannot simulate.';
    }
  }

  async function runSimulation(e) {
    e.preventDefault();
    const file = $('sim-file').files[0];
    const rule = $('sim-rule').value;
    const tier = $('sim-tier').value.trim();
    const status = $('sim-status');
    const say = (text, kind) => {
      status.textContent = text;
      if (kind) status.dataset.kind = kind; else delete status.dataset.kind;
    };
    if (!file) return say('Choose a log file first.', 'error');
    if (!rule) return say('Choose a rule.', 'error');
    const max = state.simulate ? state.simulate.max_body_bytes : Infinity;
    if (file.size > max) {
      return say(`${file.name} is ${fmtBytes(file.size)}; the server takes up to ` +
        `${fmtBytes(max)}.`, 'error');
    }
    $('sim-run').disabled = true;
    say(`Replaying ${file.name} through ${rule}…`);
    try {
      const q = `rule=${enc(rule)}` + (tier ? `&tier=${enc(tier)}` : '');
      const r = await api(`/v1/admin/simulate?${q}`, { method: 'POST', body: file });
      renderSimulation(r, file.name);
      say(`Done: ${fmt(r.events)} events from ${file.name}.`, 'ok');
    } catch (err) {
      if (err.status === 413) {
        say('The log is larger than the server takes' +
          (state.simulate ? ` (${fmtBytes(state.simulate.max_body_bytes)}).` : '.'), 'error');
      } else if (needsToken(err)) {
        say('Enter the admin token in the header first.', 'error');
      } else {
        say('Could not simulate: ' + err.message, 'error');
      }
    } finally {
      $('sim-run').disabled = false;
    }
  }

  let simChart = null;
  function renderSimulation(r, fileName) {
    $('sim-result').hidden = false;
    $('sim-caption').textContent = `${fileName} through ${r.rule}` +
      (r.tier ? ` (tier ${r.tier})` : '');
    const total = (r.admitted || 0) + (r.denied || 0);
    const span = (r.last_ms || 0) - (r.first_ms || 0);
    const items = [
      ['Events', fmt(r.events), ''],
      ['Admitted', fmt(r.admitted), 'admitted'],
      ['Denied', fmt(r.denied), 'denied'],
      ['Denied share', pct(r.denied, total), ''],
      ['Subjects', fmt(r.subjects), ''],
      ['Span', fmtDuration(span), ''],
      ['Step', fmtDuration(r.bucket_ms), ''],
    ];
    $('sim-summary').replaceChildren(...items.map(([k, v, cls]) =>
      h('div', { class: cls }, h('dt', { text: k }), h('dd', { text: v }))));
    const series = r.series || [];
    if (!simChart) {
      simChart = new Chart($('sim-chart'), { bars: true, label: (i) => {
        const p = simChart.points[i];
        return p ? fmtDateTime(p.t_ms) : '';
      } });
    }
    simChart.points = series;
    simChart.setXLabels(series.length
      ? [fmtDateTime(series[0].t_ms), fmtDateTime(series[series.length - 1].t_ms)] : []);
    simChart.update(series.map((p) => p.admitted), series.map((p) => p.denied), [],
      `${fmt(series.length)} steps of ${fmtDuration(r.bucket_ms)}; ` +
      `first ${r.first_ms ? fmtDateTime(r.first_ms) : '–'}, ` +
      `last ${r.last_ms ? fmtDateTime(r.last_ms) : '–'}`);
    $('sim-chart').dataset.points = String(series.length);
  }

  // ------------------------------------------------------------ live status

  function setLive(kind, text) {
    $('live').dataset.state = kind;
    $('live-text').textContent = text;
  }

  function notice(text, kind) {
    const el = $('notice');
    el.textContent = text || '';
    el.hidden = !text;
    if (kind) el.dataset.kind = kind; else delete el.dataset.kind;
  }

  function lock() {
    if (state.locked) return;
    state.locked = true;
    state.alerts = [];  // what the server said with another token, or none
    renderAlerts();
    $('blocks-list').replaceChildren();
    $('blocks-count').textContent = '';
    showEmpty('blocks-empty', 'Enter a token to see the blocks.');
    setLive('locked', 'Needs a token');
    notice(auth.token
      ? 'The server refused this token. Enter the admin token (or the read token, to view only).'
      : 'The admin API needs a token: enter the admin token (or the read token, to view only) ' +
        'in the header.', 'error');
    renderCharts();
  }

  // ------------------------------------------------------- event stream (SSE)

  const stream = { generation: 0, ctrl: null };

  function stopStream() {
    stream.generation += 1;
    if (stream.ctrl) stream.ctrl.abort();
    stream.ctrl = null;
  }

  // Reads text/event-stream from fetch: "event:" and "data:" lines, an
  // empty line ends an event (the EventSource rules, without EventSource,
  // which cannot send Authorization).
  async function runStream() {
    const generation = ++stream.generation;
    let delay = 1000;
    let first = true;
    while (generation === stream.generation) {
      if (!first) {
        // Whatever was missed while away comes back with the whole window.
        try { await loadStats(); } catch (e) { /* reported there */ }
        if (state.locked || generation !== stream.generation) return;
      }
      first = false;
      const ctrl = new AbortController();
      stream.ctrl = ctrl;
      try {
        const res = await fetch('/v1/admin/events', { headers: headers({
          Accept: 'text/event-stream' }), cache: 'no-store', signal: ctrl.signal });
        if (res.status === 401 || res.status === 403) { await res.text(); lock(); return; }
        if (res.status === 404) {
          await res.text();
          setLive('error', 'No live events on this server');
          return;
        }
        if (!res.ok || !res.body) { await res.text(); throw new Error('HTTP ' + res.status); }
        setLive('live', 'Live');
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '', event = '', data = [];
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          for (;;) {
            const m = /\r\n|\r|\n/.exec(buf);
            if (!m) break;
            // A lone CR at the end may be the first half of a CRLF.
            if (m[0] === '\r' && m.index === buf.length - 1) break;
            const line = buf.slice(0, m.index);
            buf = buf.slice(m.index + m[0].length);
            if (line === '') {
              if (data.length) dispatch(event || 'message', data.join('\n'));
              event = '';
              data = [];
              delay = 1000;
            } else if (line[0] !== ':') {
              const c = line.indexOf(':');
              const field = c < 0 ? line : line.slice(0, c);
              let v = c < 0 ? '' : line.slice(c + 1);
              if (v[0] === ' ') v = v.slice(1);
              if (field === 'event') event = v;
              else if (field === 'data') data.push(v);
            }
          }
        }
      } catch (e) {
        if (ctrl.signal.aborted || generation !== stream.generation) return;
      }
      if (generation !== stream.generation) return;
      for (let left = Math.round(delay / 1000); left > 0; left--) {
        setLive('retrying', `Reconnecting in ${left} s`);
        await sleep(1000);
        if (generation !== stream.generation) return;
      }
      delay = Math.min(delay * 2, 30000);
    }
  }

  let frame = 0;
  function scheduleRender() {
    if (frame) return;
    frame = requestAnimationFrame(() => {
      frame = 0;
      renderCharts();
      renderFacts();
      renderStore();
      renderConnections();
      renderPriorities();
      renderRulePickers();
    });
  }

  let lastEventAt = 0;
  function dispatch(event, data) {
    let value;
    try { value = JSON.parse(data); } catch (e) { return; }
    if (event === 'stats') {
      takeSecond(value);
      lastEventAt = Date.now();
      setLive('live', 'Live · ' + fmtClock(value.now_ms || Date.now()));
      scheduleRender();
    } else if (event === 'alert') {
      takeAlert(value);
    }
  }

  // ------------------------------------------------------------------ loads

  async function loadStats() {
    try {
      const stats = await api('/v1/admin/stats');
      if (!auth.token) auth.openWithoutToken = true;
      state.locked = false;
      state.statsMissing = false;
      notice('');
      takeStats(stats);
      renderAlerts();
      scheduleRender();
      updateActionAccess();
    } catch (e) {
      if (needsToken(e)) { lock(); return; }
      if (e.status === 404) {
        state.statsMissing = true;
        notice('This server has no /v1/admin/stats: charts and health are unavailable.', 'error');
        return;
      }
      notice('Could not load the server\'s statistics: ' + e.message, 'error');
      throw e;
    }
  }

  async function loadPriorities() {
    try {
      const stats = await api('/v1/admin/stats');
      state.priorities = stats.priorities || [];
      renderPriorities();
    } catch (e) {
      // The next refresh tries again; loadStats reports what is wrong.
    }
  }

  async function loadRuleInfo() {
    try {
      const data = await api('/v1/rules');
      state.ruleInfo = (data && data.rules) || {};
      scheduleRender();
    } catch (e) { /* captions are optional (the data plane may need its own token) */ }
  }

  async function start() {
    stopStream();
    state.locked = false;
    state.defaultRulePicked = false;
    setLive('idle', 'Connecting');
    try { await loadStats(); } catch (e) { /* shown in the notice; the stream retries */ }
    if (state.locked) return;
    loadRuleInfo();
    runStream();
    renderRulePickers();
    loadTop();
    loadBlocks();
  }

  // ------------------------------------------------------------------ router

  function route() {
    const view = location.hash.startsWith('#/simulate') ? 'simulate' : 'overview';
    $('view-overview').hidden = view !== 'overview';
    $('view-simulate').hidden = view !== 'simulate';
    for (const a of document.querySelectorAll('nav a')) {
      if (a.dataset.route === view) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    document.title = view === 'simulate' ? 'Simulate · floodgate' : 'floodgate';
  }

  // ------------------------------------------------------------------- token

  function renderToken() {
    $('token').value = '';
    $('token').placeholder = auth.token ? 'saved' : 'not set';
    $('token-form').classList.toggle('has-token', Boolean(auth.token));
    $('token-forget').hidden = !auth.token;
  }

  function initToken() {
    loadToken();
    renderToken();
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const value = $('token').value.trim();
      if (!value) return;
      auth.token = value;
      auth.openWithoutToken = false;
      try { sessionStorage.setItem(TOKEN_KEY, value); } catch (err) { /* kept in memory */ }
      renderToken();
      notice('');
      start();
      if (state.subject) openSubject(state.subject.rule, state.subject.key, { quiet: true });
    });
    $('token-forget').addEventListener('click', () => {
      auth.token = '';
      try { sessionStorage.removeItem(TOKEN_KEY); } catch (err) { /* nothing kept */ }
      renderToken();
      updateActionAccess();
      start();
    });
  }

  // -------------------------------------------------------------------- init

  function init() {
    initTheme();
    initToken();
    route();
    window.addEventListener('hashchange', route);

    $('top-form').addEventListener('change', () => { renderTopBy(); loadTop(); });
    $('top-form').addEventListener('submit', (e) => { e.preventDefault(); loadTop(); });
    $('lookup-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const key = $('lookup-key').value.trim();
      const rule = $('top-rule').value;
      if (key && rule) openSubject(rule, key);
    });
    $('subject-close').addEventListener('click', () => {
      state.subject = null;
      $('subject-body').hidden = true;
      $('subject-empty').hidden = false;
      $('subject-close').hidden = true;
      for (const tr of $('top-body').children) tr.classList.remove('selected');
    });
    $('act-reset').addEventListener('click', () => act('reset'));
    $('block-form').addEventListener('submit', (e) => { e.preventDefault(); act('block'); });
    $('override-form').addEventListener('submit', (e) => { e.preventDefault(); act('override'); });
    $('network-block-form').addEventListener('submit', (e) => {
      e.preventDefault();
      blockNetwork();
    });
    $('sim-form').addEventListener('submit', runSimulation);

    setInterval(() => {
      if (document.hidden || state.locked) return;
      renderFacts();
      if (!$('view-overview').hidden) {
        loadTop();
        loadBlocks();
        // The classes' counts come with the stats, not the event stream.
        if ((state.priorities || []).length) loadPriorities();
      }
    }, TOP_REFRESH_MS);
    setInterval(() => {
      // A stream that stops talking without ending: start over.
      if ($('live').dataset.state === 'live' && lastEventAt && Date.now() - lastEventAt > 10000) {
        lastEventAt = 0;
        stopStream();
        runStream();
      }
    }, 5000);

    renderAlerts();
    renderStore();
    renderConnections();
    updateActionAccess();
    start();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
