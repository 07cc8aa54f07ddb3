// Dossier's web UI: plain JavaScript, no build step, no framework.
//
// Every piece of text that comes from the server (answers, quotes, document text,
// names) is untrusted: it is only ever placed with textContent or as an SVG text
// node, never parsed as HTML.
'use strict';

(function () {
  const KEY_STORE = 'dossier.apiKey';
  const LANG_STORE = 'dossier.lang';
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const DATE = /^\d{4}-\d{2}-\d{2}$/;

  const I18N = {
    en: {
      colon: ': ',
      tab_ask: 'Ask',
      tab_review: 'Review queue',
      sign_out: 'Sign out',
      login_title: 'API key',
      login_help:
        'Enter your API key. It is kept in this tab only (session storage) and sent with every request.',
      api_key: 'API key',
      login_submit: 'Use this key',
      login_rejected: 'This key was not accepted.',
      login_unknown_principal: 'This key names a principal the store does not know.',
      session_expired: 'The key is no longer accepted; enter a key again.',
      signed_in: 'Signed in',
      admin: 'administrator',
      question: 'Question',
      question_placeholder: 'Ask a question about your documents',
      now: 'Business date',
      as_of: 'As of',
      ask: 'Ask',
      asking: 'Asking…',
      bad_date: 'Dates are written YYYY-MM-DD.',
      answer: 'Answer',
      sources: 'Sources',
      request_id: 'Request id',
      cited_section: 'Cited section',
      section_hint:
        'Click a source mark such as [1] to open the cited section of the exact version.',
      section_unavailable: 'This section is not available to you.',
      page: 'page {n}',
      open_page: 'Open at this page',
      source: 'Source',
      conflicts: 'Conflicts',
      no_conflicts: 'No conflicting versions.',
      conflicts_with: 'conflicts with',
      gaps: 'Gaps',
      no_gaps: 'No gaps.',
      timeline: 'Agent steps',
      trace_summary: '{steps} steps · planner {planner} · writer {writer}',
      sub_question: 'Sub-question',
      evidence: 'Evidence',
      no_evidence: 'no evidence',
      proposed_by: 'proposed by',
      attempt: 'attempt',
      audit: 'Audit',
      degraded: 'Degraded',
      verifier: 'Verifier',
      rejected: 'Rejected proposals',
      graph: 'Evidence graph',
      no_graph: 'No relations among the cited sources.',
      review_title: 'Review queue',
      review_show_all: 'Show decided too',
      refresh: 'Refresh',
      review_empty: 'Nothing waits for review.',
      open: 'Open',
      candidate: 'Candidate',
      tenant: 'Tenant',
      note: 'Note (why)',
      approve: 'Approve',
      reject: 'Reject',
      supporting_text: 'Supporting source text',
      decided: '{verdict} by {by} at {at}',
      decided_note: 'Note: {note}',
      ask_again: 'Decisions change answers: ask again to see the effect.',
      sup: '{newer} supersedes {older}?',
      mrg: '{alias} and {canonical} are the same entity?',
      rel: '{from} —{relation}→ {to}?',
      status_answered: 'answered',
      status_partial: 'partial',
      status_insufficient_evidence: 'insufficient evidence',
      status_unavailable: 'unavailable',
      tool_ok: 'ok',
      tool_no_hit: 'no hit',
      tool_timeout: 'timeout',
      tool_forbidden: 'forbidden',
      tool_error: 'error',
      doc_active: 'in force',
      doc_deprecated: 'deprecated',
      doc_not_yet_in_force: 'not yet in force',
      review_open: 'open',
      review_approved: 'approved',
      review_rejected: 'rejected',
      verdict_approved: 'Approved',
      verdict_rejected: 'Rejected',
    },
    zh: {
      colon: '：',
      tab_ask: '提问',
      tab_review: '审核队列',
      sign_out: '退出',
      login_title: 'API 密钥',
      login_help: '请输入 API 密钥。密钥只保存在当前标签页（会话存储）中，并随每个请求发送。',
      api_key: 'API 密钥',
      login_submit: '使用此密钥',
      login_rejected: '此密钥未被接受。',
      login_unknown_principal: '此密钥对应的主体在库中不存在。',
      session_expired: '密钥已失效，请重新输入。',
      signed_in: '已登录',
      admin: '管理员',
      question: '问题',
      question_placeholder: '就你的文档提一个问题',
      now: '业务日期',
      as_of: '截至日期',
      ask: '提问',
      asking: '正在回答…',
      bad_date: '日期格式为 YYYY-MM-DD。',
      answer: '回答',
      sources: '来源',
      request_id: '请求编号',
      cited_section: '引用的章节',
      section_hint: '点击 [1] 这样的来源标记，打开所引用版本的对应章节。',
      section_unavailable: '你无权查看此章节。',
      page: '第 {n} 页',
      open_page: '打开此页',
      source: '出处',
      conflicts: '冲突',
      no_conflicts: '没有相互冲突的版本。',
      conflicts_with: '与之冲突：',
      gaps: '缺口',
      no_gaps: '没有缺口。',
      timeline: '智能体步骤',
      trace_summary: '共 {steps} 步 · 规划器 {planner} · 撰写器 {writer}',
      sub_question: '子问题',
      evidence: '证据',
      no_evidence: '无证据',
      proposed_by: '提出者',
      attempt: '尝试',
      audit: '审计',
      degraded: '降级',
      verifier: '校验',
      rejected: '被拒绝的提议',
      graph: '证据图',
      no_graph: '引用的来源之间没有关系。',
      review_title: '审核队列',
      review_show_all: '同时显示已决定的',
      refresh: '刷新',
      review_empty: '没有待审核的候选。',
      open: '打开',
      candidate: '候选',
      tenant: '租户',
      note: '备注（理由）',
      approve: '批准',
      reject: '驳回',
      supporting_text: '支持该候选的原文',
      decided: '{by} 于 {at} {verdict}',
      decided_note: '备注：{note}',
      ask_again: '审核决定会改变回答：请重新提问查看效果。',
      sup: '{newer} 取代 {older}？',
      mrg: '{alias} 与 {canonical} 是同一实体？',
      rel: '{from} —{relation}→ {to}？',
      status_answered: '已回答',
      status_partial: '部分回答',
      status_insufficient_evidence: '证据不足',
      status_unavailable: '不可用',
      tool_ok: '成功',
      tool_no_hit: '无结果',
      tool_timeout: '超时',
      tool_forbidden: '无权限',
      tool_error: '出错',
      doc_active: '有效',
      doc_deprecated: '已废止',
      doc_not_yet_in_force: '尚未生效',
      review_open: '待审',
      review_approved: '已批准',
      review_rejected: '已驳回',
      verdict_approved: '批准',
      verdict_rejected: '驳回',
    },
  };

  const state = {
    lang: 'en',
    admin: false,
    last: null, // {resp, requestId, now, asOf}
    activeMark: null,
    section: null, // {data} | {error}
    graph: null, // {data} | {error}
    review: { items: [], current: null, error: null, loaded: false },
  };

  // ---------------------------------------------------------------- helpers

  function $(id) {
    return document.getElementById(id);
  }

  function t(key, vars) {
    const table = I18N[state.lang] || I18N.en;
    let s = key in table ? table[key] : key in I18N.en ? I18N.en[key] : key;
    if (vars) {
      for (const [k, v] of Object.entries(vars)) s = s.split('{' + k + '}').join(String(v));
    }
    return s;
  }

  // A translated word for a value of the server's (status names and the like), or
  // the value itself when there is no translation.
  function word(prefix, value) {
    const key = prefix + value;
    return key in I18N.en ? t(key) : String(value);
  }

  // el('li', {className: 'x', dataset: {id: '1'}}, 'text', child, ...): text is
  // always a text node.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null) continue;
        if (k === 'className') node.className = v;
        else if (k === 'text') node.textContent = v;
        else if (k === 'dataset') Object.assign(node.dataset, v);
        else if (k === 'onclick') node.addEventListener('click', v);
        else node.setAttribute(k, v);
      }
    }
    append(node, children);
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG_NS, tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v === undefined || v === null) continue;
        if (k === 'text') node.textContent = v;
        else node.setAttribute(k, String(v));
      }
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      node.append(typeof c === 'string' || typeof c === 'number' ? String(c) : c);
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function show(node, on) {
    node.hidden = !on;
  }

  function showError(node, err) {
    if (!err) {
      node.textContent = '';
      show(node, false);
      return;
    }
    node.textContent = typeof err === 'string' ? err : errorText(err);
    show(node, true);
  }

  function errorText(e) {
    let s = e.message || String(e);
    if (e.code) s += ' (' + e.code + ')';
    if (e.requestId) s += ' · ' + t('request_id') + ' ' + e.requestId;
    return s;
  }

  function ref(docId, version) {
    return docId + '@' + version;
  }

  function badge(text, cls) {
    return el('span', { className: 'badge ' + (cls || ''), text });
  }

  // ---------------------------------------------------------------- the API

  class ApiFailure extends Error {
    constructor(status, body, requestId) {
      super((body && body.message) || 'HTTP ' + status);
      this.status = status;
      this.code = body && body.code;
      this.requestId = (body && body.request_id) || requestId;
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const key = sessionStorage.getItem(KEY_STORE);
    if (key) headers.Authorization = 'Bearer ' + key;
    const init = { method, headers, credentials: 'omit', cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    const requestId = resp.headers.get('x-request-id') || '';
    const text = await resp.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch (_) {
      data = null;
    }
    if (!resp.ok) {
      const failure = new ApiFailure(resp.status, data, requestId);
      if (resp.status === 401 && path !== '/v1/review?status=open') expire();
      throw failure;
    }
    return { data, requestId };
  }

  // ---------------------------------------------------------------- language

  function applyLanguage() {
    document.documentElement.lang = state.lang === 'zh' ? 'zh-CN' : 'en';
    for (const node of document.querySelectorAll('[data-i18n]')) {
      node.textContent = t(node.dataset.i18n);
    }
    for (const node of document.querySelectorAll('[data-i18n-placeholder]')) {
      node.setAttribute('placeholder', t(node.dataset.i18nPlaceholder));
    }
    const toggle = $('lang-toggle');
    toggle.textContent = state.lang === 'zh' ? 'English' : '中文';
    toggle.setAttribute('lang', state.lang === 'zh' ? 'en' : 'zh-CN');
    $('graph-label').textContent = t('graph');
    renderWho();
    if (state.last) renderResult();
    renderSection();
    renderGraph();
    renderReviewList();
    renderReviewDetail();
  }

  function initialLanguage() {
    const saved = localStorage.getItem(LANG_STORE);
    if (saved === 'en' || saved === 'zh') return saved;
    return (navigator.language || '').toLowerCase().startsWith('zh') ? 'zh' : 'en';
  }

  // ---------------------------------------------------------------- sign in

  function renderWho() {
    const key = sessionStorage.getItem(KEY_STORE);
    $('whoami').textContent = key ? t('signed_in') + (state.admin ? ' · ' + t('admin') : '') : '';
  }

  function showLogin(message) {
    show($('app'), false);
    show($('tabs'), false);
    show($('sign-out'), false);
    show($('login'), true);
    showError($('login-error'), message || null);
    renderWho();
    $('api-key').focus();
  }

  function expire() {
    sessionStorage.removeItem(KEY_STORE);
    state.admin = false;
    showLogin(t('session_expired'));
  }

  // Whether the key is an administrator's: the review queue answers 200 only then.
  // Returns 'admin', 'user', or an error code for a key that is not accepted.
  async function probe() {
    try {
      await api('GET', '/v1/review?status=open');
      return 'admin';
    } catch (e) {
      if (e.status === 401) return 'unauthorized';
      if (e.code === 'unknown_principal') return 'unknown_principal';
      return 'user';
    }
  }

  async function signIn(key) {
    sessionStorage.setItem(KEY_STORE, key);
    const who = await probe();
    if (who === 'unauthorized' || who === 'unknown_principal') {
      sessionStorage.removeItem(KEY_STORE);
      showLogin(t(who === 'unauthorized' ? 'login_rejected' : 'login_unknown_principal'));
      return;
    }
    state.admin = who === 'admin';
    enterApp();
  }

  function enterApp() {
    show($('login'), false);
    show($('app'), true);
    show($('tabs'), true);
    show($('sign-out'), true);
    show($('tab-review'), state.admin);
    if (!state.admin) switchView('ask-view');
    $('api-key').value = '';
    renderWho();
    $('question').focus();
  }

  function signOut() {
    sessionStorage.removeItem(KEY_STORE);
    state.admin = false;
    state.last = null;
    state.section = null;
    state.graph = null;
    state.review = { items: [], current: null, error: null, loaded: false };
    // Nothing of the previous key's answers stays in the page.
    for (const id of ['answer', 'citations', 'conflicts', 'gaps', 'timeline', 'rejected', 'section-chunks', 'review-evidence']) {
      clear($(id));
    }
    for (const id of ['request-id', 'answer-status', 'trace-summary', 'section-ref', 'section-title', 'section-path', 'section-uri', 'review-subject', 'review-reason', 'review-decision']) {
      $(id).textContent = '';
    }
    $('question').value = '';
    show($('result'), false);
    renderSection();
    renderGraph();
    renderReviewList();
    renderReviewDetail();
    showLogin(null);
  }

  function switchView(id) {
    for (const tab of document.querySelectorAll('.tab')) {
      const on = tab.dataset.view === id;
      tab.classList.toggle('active', on);
      tab.setAttribute('aria-selected', on ? 'true' : 'false');
    }
    show($('ask-view'), id === 'ask-view');
    show($('review-view'), id === 'review-view');
    if (id === 'review-view') loadReview();
  }

  // ---------------------------------------------------------------- ask

  async function ask(event) {
    event.preventDefault();
    const question = $('question').value.trim();
    const now = $('now').value.trim();
    const asOf = $('as-of').value.trim();
    showError($('ask-error'), null);
    if (!question) return;
    if ((now && !DATE.test(now)) || (asOf && !DATE.test(asOf))) {
      showError($('ask-error'), t('bad_date'));
      return;
    }
    const body = { question };
    if (now) body.now = now;
    if (asOf) body.as_of = asOf;
    const button = $('ask-submit');
    button.disabled = true;
    show($('ask-busy'), true);
    try {
      const { data, requestId } = await api('POST', '/v1/ask', body);
      state.last = { resp: data, requestId, now: now || null, asOf: asOf || null };
      state.activeMark = null;
      state.section = null;
      state.graph = null;
      renderResult();
      renderSection();
      renderGraph();
      show($('result'), true);
      loadGraph();
    } catch (e) {
      showError($('ask-error'), e);
    } finally {
      button.disabled = false;
      show($('ask-busy'), false);
    }
  }

  function citationByMark() {
    const map = new Map();
    for (const c of (state.last && state.last.resp.citations) || []) map.set(String(c.mark), c);
    return map;
  }

  function markButton(c) {
    const b = el('button', {
      type: 'button',
      className: 'mark' + (state.activeMark === String(c.mark) ? ' active' : ''),
      dataset: { mark: String(c.mark), chunkId: c.chunk_id },
      title: ref(c.doc_id, c.version) + (c.section ? ' § ' + c.section : ''),
      'aria-pressed': state.activeMark === String(c.mark) ? 'true' : 'false',
      text: '[' + c.mark + ']',
    });
    b.addEventListener('click', () => openSection(c.chunk_id, String(c.mark)));
    return b;
  }

  function renderResult() {
    const { resp, requestId } = state.last;
    const status = resp.status || '';
    const statusBadge = $('answer-status');
    statusBadge.textContent = word('status_', status);
    statusBadge.className = 'badge status-' + status;
    $('request-id').textContent = requestId;

    // The answer, with each [N] that names a citation turned into a button.
    const marks = citationByMark();
    const answer = $('answer');
    clear(answer);
    const text = resp.answer || '';
    const re = /\[(\d+)\]/g;
    let at = 0;
    let m;
    while ((m = re.exec(text)) !== null) {
      const c = marks.get(m[1]);
      if (!c) continue;
      if (m.index > at) answer.append(text.slice(at, m.index));
      answer.append(markButton(c));
      at = m.index + m[0].length;
    }
    if (at < text.length) answer.append(text.slice(at));

    const list = $('citations');
    clear(list);
    for (const c of resp.citations || []) {
      list.append(
        el(
          'li',
          { dataset: { mark: String(c.mark), chunkId: c.chunk_id } },
          markButton(c),
          ' ',
          el('code', { className: 'cite-ref', text: ref(c.doc_id, c.version) }),
          c.section ? el('span', { className: 'muted', text: ' § ' + c.section }) : null,
          c.quote ? el('q', { className: 'quote', lang: 'zh-CN', text: c.quote }) : null,
          c.source_uri ? el('div', { className: 'muted small', text: c.source_uri }) : null,
        ),
      );
    }

    renderConflicts(resp.conflicts || []);
    renderGaps(resp.gaps || []);
    renderTimeline(resp.trace || {});
  }

  function renderConflicts(conflicts) {
    const list = $('conflicts');
    clear(list);
    for (const c of conflicts) {
      if (c && typeof c === 'object' && c.doc_id) {
        const other = c.conflicts_with || {};
        list.append(
          el(
            'li',
            { className: 'conflict' },
            el('code', { text: ref(c.doc_id, c.version) }),
            ' ' + t('conflicts_with') + ' ',
            el('code', { text: ref(other.doc_id || '?', other.version || '?') }),
            c.reason ? el('div', { className: 'muted small', text: c.reason }) : null,
          ),
        );
      } else {
        list.append(el('li', { className: 'conflict', text: typeof c === 'string' ? c : JSON.stringify(c) }));
      }
    }
    show($('conflicts-none'), conflicts.length === 0);
  }

  function renderGaps(gaps) {
    const list = $('gaps');
    clear(list);
    for (const g of gaps) {
      list.append(el('li', { className: 'gap', text: typeof g === 'string' ? g : JSON.stringify(g) }));
    }
    show($('gaps-none'), gaps.length === 0);
  }

  function compactArgs(args) {
    if (!args || typeof args !== 'object') return '';
    return Object.entries(args)
      .map(([k, v]) => k + '=' + (typeof v === 'string' ? v : JSON.stringify(v)))
      .join(' · ');
  }

  function renderTimeline(trace) {
    const steps = trace.steps || [];
    const subs = trace.sub_questions || [];
    $('trace-summary').textContent = t('trace_summary', {
      steps: steps.length,
      planner: trace.planner || '?',
      writer: trace.writer || '?',
    });
    const list = $('timeline');
    clear(list);
    steps.forEach((s, i) => {
      const status = s.status || '';
      const sub = subs[s.sub_question];
      const evidence = s.evidence || [];
      const evidenceList = el('span', { className: 'evidence-ids' });
      if (evidence.length === 0) evidenceList.append(t('no_evidence'));
      evidence.forEach((id, j) => {
        if (j > 0) evidenceList.append(' ');
        evidenceList.append(el('code', { text: id }));
      });
      list.append(
        el(
          'li',
          { className: 'step status-' + status, dataset: { status, action: s.action || '' } },
          el(
            'div',
            { className: 'step-head' },
            el('span', { className: 'step-n', text: String(i + 1) }),
            el('strong', { className: 'step-action', text: s.action || '?' }),
            badge(word('tool_', status), 'step-status status-' + status),
            el('span', { className: 'muted small', text: (s.elapsed_ms || 0) + ' ms' }),
            el('span', {
              className: 'muted small',
              text:
                t('proposed_by') + ' ' + (s.proposed_by || '?') +
                (s.attempt > 1 ? ' · ' + t('attempt') + ' ' + s.attempt : ''),
            }),
          ),
          el('div', { className: 'step-args', text: compactArgs(s.args) }),
          sub ? el('div', { className: 'muted small', text: t('sub_question') + t('colon') + (sub.rewritten || sub.text) }) : null,
          el('div', { className: 'small' }, t('evidence') + t('colon'), evidenceList),
          s.audit ? el('div', { className: 'muted small', text: t('audit') + t('colon') + s.audit }) : null,
        ),
      );
    });
    for (const d of trace.degraded || []) {
      list.append(el('li', { className: 'step note', text: t('degraded') + t('colon') + d }));
    }
    for (const v of trace.verifier || []) {
      list.append(el('li', { className: 'step note', text: t('verifier') + t('colon') + v }));
    }
    const rejected = trace.rejected_proposals || [];
    const rl = $('rejected');
    clear(rl);
    for (const r of rejected) {
      rl.append(
        el('li', {}, el('code', { text: JSON.stringify(r.proposal) }), ' — ' + (r.reason || '') + ' (' + (r.proposed_by || '?') + ')'),
      );
    }
    show($('rejected-wrap'), rejected.length > 0);
  }

  // ---------------------------------------------------------------- cited section

  async function openSection(chunkId, mark) {
    state.activeMark = mark || null;
    for (const b of document.querySelectorAll('button.mark')) {
      const on = b.dataset.mark === state.activeMark;
      b.classList.toggle('active', on);
      b.setAttribute('aria-pressed', on ? 'true' : 'false');
    }
    state.section = { loading: chunkId };
    renderSection();
    try {
      // The version's status is judged at the question's business date.
      const params = new URLSearchParams();
      if (state.last && state.last.now) params.set('now', state.last.now);
      if (state.last && state.last.asOf) params.set('as_of', state.last.asOf);
      const query = params.toString() ? '?' + params.toString() : '';
      const { data } = await api('GET', '/v1/sections/' + encodeURIComponent(chunkId) + query);
      if (!state.section || state.section.loading !== chunkId) return; // a later click won
      state.section = { data };
    } catch (e) {
      if (!state.section || state.section.loading !== chunkId) return;
      state.section = { error: e };
    }
    renderSection();
    const cited = document.querySelector('#section-chunks .chunk.cited');
    if (cited) cited.scrollIntoView({ block: 'nearest' });
  }

  function renderSection() {
    const s = state.section;
    show($('section-empty'), !s);
    const box = $('section');
    const err = $('section-error');
    if (!s || s.loading) {
      show(box, false);
      showError(err, null);
      return;
    }
    if (s.error) {
      show(box, false);
      showError(err, s.error.status === 404 ? t('section_unavailable') : s.error);
      return;
    }
    showError(err, null);
    const d = s.data;
    box.dataset.chunkId = d.chunk_id || '';
    $('section-ref').textContent = ref(d.doc_id, d.version);
    const st = $('section-status');
    st.textContent = word('doc_', d.status || '');
    st.className = 'badge doc-' + (d.status || '');
    $('section-title').textContent = d.title || '';
    $('section-path').textContent = (d.section_path && d.section_path.length ? d.section_path.join(' › ') : d.section) || '';
    $('section-uri').textContent = d.source_uri || '';
    // A PDF's section is on one page: name it, and open the source there when the
    // source is a web address (`#page=N` is the PDF viewers' fragment).
    const page = $('section-page');
    const open = $('section-open');
    show(page, !!d.page);
    page.textContent = d.page ? t('page', { n: d.page }) : '';
    const web = d.page && /^https?:\/\//i.test(d.source_uri || '');
    show(open, web);
    if (web) open.href = d.source_uri.replace(/#.*$/, '') + '#page=' + d.page;
    else open.removeAttribute('href');
    const chunks = $('section-chunks');
    clear(chunks);
    for (const c of d.chunks || []) {
      chunks.append(
        el('p', {
          className: 'chunk' + (c.chunk_id === d.chunk_id ? ' cited' : ''),
          lang: 'zh-CN',
          dataset: { chunkId: c.chunk_id },
          text: c.text,
        }),
      );
    }
    show(box, true);
  }

  // ---------------------------------------------------------------- evidence graph

  async function loadGraph() {
    const last = state.last;
    const cites = [...new Set(((last && last.resp.citations) || []).map((c) => c.chunk_id))];
    if (cites.length === 0) {
      state.graph = { data: { nodes: [], edges: [] } };
      renderGraph();
      return;
    }
    const body = { cites };
    if (last.now) body.now = last.now;
    if (last.asOf) body.as_of = last.asOf;
    try {
      const { data } = await api('POST', '/v1/graph/evidence', body);
      if (state.last !== last) return;
      state.graph = { data, layout: layout(data) };
    } catch (e) {
      if (state.last !== last) return;
      state.graph = { error: e };
    }
    renderGraph();
  }

  function kindName(kind) {
    if (typeof kind === 'string') return kind;
    if (kind && typeof kind === 'object') {
      const k = Object.keys(kind)[0];
      return k === 'other' ? String(kind[k]) : k || 'entity';
    }
    return 'entity';
  }

  const W = 720;
  const H = 420;

  // Node positions: a circle, then a few hundred steps of a simple force layout
  // (repulsion between all nodes, springs along edges, a pull to the centre).
  // Deterministic: the same graph is always drawn the same way.
  function layout(data) {
    const nodes = [];
    const index = new Map();
    const add = (key, name, kind) => {
      if (index.has(key)) return index.get(key);
      const i = nodes.length;
      nodes.push({ key, name, kind });
      index.set(key, i);
      return i;
    };
    for (const n of data.nodes || []) {
      const i = add(n.id, n.name || n.id, kindName(n.kind));
      if (n.name && !index.has(n.name)) index.set(n.name, i);
    }
    const edges = [];
    for (const e of data.edges || []) {
      const a = index.has(e.from) ? index.get(e.from) : add(e.from, e.from, 'entity');
      const b = index.has(e.to) ? index.get(e.to) : add(e.to, e.to, 'entity');
      edges.push({ a, b, relation: e.relation, provenance: e.provenance || [] });
    }
    const n = nodes.length;
    const cx = W / 2;
    const cy = H / 2;
    nodes.forEach((node, i) => {
      const angle = (2 * Math.PI * i) / Math.max(n, 1);
      node.x = cx + Math.cos(angle) * Math.min(W, H) * 0.35;
      node.y = cy + Math.sin(angle) * Math.min(W, H) * 0.35;
    });
    const k = Math.sqrt((W * H) / Math.max(n, 1)) * 0.6;
    for (let iter = 0; iter < 300 && n > 1; iter++) {
      const temp = 40 * (1 - iter / 300) + 1;
      const dx = new Array(n).fill(0);
      const dy = new Array(n).fill(0);
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          let x = nodes[i].x - nodes[j].x;
          let y = nodes[i].y - nodes[j].y;
          let d = Math.hypot(x, y);
          if (d < 0.01) {
            x = 0.01 * (i - j);
            y = 0.01;
            d = Math.hypot(x, y);
          }
          // Repulsion reaches a few ideal lengths only, so that separate pieces of
          // the graph are not pushed to the corners.
          if (d > 3 * k) continue;
          const f = (k * k) / d;
          dx[i] += (x / d) * f;
          dy[i] += (y / d) * f;
          dx[j] -= (x / d) * f;
          dy[j] -= (y / d) * f;
        }
      }
      for (const e of edges) {
        if (e.a === e.b) continue;
        const x = nodes[e.a].x - nodes[e.b].x;
        const y = nodes[e.a].y - nodes[e.b].y;
        const d = Math.max(Math.hypot(x, y), 0.01);
        const f = (d * d) / k;
        dx[e.a] -= (x / d) * f;
        dy[e.a] -= (y / d) * f;
        dx[e.b] += (x / d) * f;
        dy[e.b] += (y / d) * f;
      }
      for (let i = 0; i < n; i++) {
        dx[i] += (cx - nodes[i].x) * 0.1;
        dy[i] += (cy - nodes[i].y) * 0.1;
        const d = Math.max(Math.hypot(dx[i], dy[i]), 0.01);
        nodes[i].x += (dx[i] / d) * Math.min(d, temp);
        nodes[i].y += (dy[i] / d) * Math.min(d, temp);
      }
    }
    // Fit into the drawing with a margin for labels.
    const margin = 60;
    const xs = nodes.map((p) => p.x);
    const ys = nodes.map((p) => p.y);
    const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
    const sx = x1 - x0 > 1 ? (W - 2 * margin) / (x1 - x0) : 1;
    const sy = y1 - y0 > 1 ? (H - 2 * margin) / (y1 - y0) : 1;
    for (const p of nodes) {
      p.x = x1 - x0 > 1 ? margin + (p.x - x0) * sx : cx;
      p.y = y1 - y0 > 1 ? margin + (p.y - y0) * sy : cy;
    }
    return { nodes, edges };
  }

  function renderGraph() {
    const root = $('graph');
    for (const child of [...root.childNodes]) {
      if (child.nodeName !== 'title') root.removeChild(child);
    }
    const g = state.graph;
    showError($('graph-error'), g && g.error ? g.error : null);
    const empty = !g || !g.layout || g.layout.nodes.length === 0;
    show($('graph-none'), !!g && !g.error && empty);
    show($('graph-wrap'), !empty);
    if (empty) return;
    const { nodes, edges } = g.layout;
    root.append(
      svg(
        'defs',
        null,
        svg(
          'marker',
          { id: 'arrow', viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse' },
          svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', class: 'arrow-head' }),
        ),
      ),
    );
    const R = 16;
    const pairCount = new Map();
    const edgeLayer = svg('g', { class: 'edges' });
    // Relation names are drawn last, over the nodes, so that none is hidden.
    const labelLayer = svg('g', { class: 'edge-labels' });
    for (const e of edges) {
      const a = nodes[e.a];
      const b = nodes[e.b];
      const pair = Math.min(e.a, e.b) + ':' + Math.max(e.a, e.b);
      const nth = pairCount.get(pair) || 0;
      pairCount.set(pair, nth + 1);
      const d = Math.max(Math.hypot(b.x - a.x, b.y - a.y), 0.01);
      const ux = (b.x - a.x) / d;
      const uy = (b.y - a.y) / d;
      const group = svg('g', { class: 'edge', 'data-relation': e.relation });
      group.append(svg('title', { text: e.relation + '\n' + e.provenance.join('\n') }));
      group.append(
        svg('line', {
          x1: a.x + ux * R,
          y1: a.y + uy * R,
          x2: b.x - ux * (R + 2),
          y2: b.y - uy * (R + 2),
          'marker-end': 'url(#arrow)',
        }),
      );
      labelLayer.append(
        svg('text', {
          class: 'edge-label',
          'data-relation': e.relation,
          x: (a.x + b.x) / 2,
          y: (a.y + b.y) / 2 - 4 + nth * 14,
          'text-anchor': 'middle',
          text: e.relation,
        }),
      );
      edgeLayer.append(group);
    }
    root.append(edgeLayer);
    const nodeLayer = svg('g', { class: 'nodes' });
    for (const p of nodes) {
      const kind = p.kind.replace(/[^a-z0-9_-]/gi, '_');
      nodeLayer.append(
        svg(
          'g',
          { class: 'node kind-' + kind, 'data-id': p.key, transform: 'translate(' + p.x.toFixed(1) + ',' + p.y.toFixed(1) + ')' },
          svg('title', { text: p.name + ' (' + p.kind + ')' }),
          svg('circle', { r: R }),
          svg('text', { class: 'node-label', y: R + 14, 'text-anchor': 'middle', text: p.name }),
        ),
      );
    }
    root.append(nodeLayer);
    root.append(labelLayer);
  }

  // ---------------------------------------------------------------- review queue

  function describeSubject(s) {
    if (!s || typeof s !== 'object') return String(s);
    switch (s.kind) {
      case 'supersession':
        return t('sup', { newer: ref(s.newer.doc_id, s.newer.version), older: ref(s.older.doc_id, s.older.version) });
      case 'merge':
        return t('mrg', { alias: s.alias, canonical: s.canonical });
      case 'relation':
        return t('rel', { from: s.from, relation: s.relation, to: s.to });
      default:
        return JSON.stringify(s);
    }
  }

  async function loadReview() {
    const all = $('review-all').checked;
    try {
      const { data } = await api('GET', '/v1/review?status=' + (all ? 'all' : 'open'));
      state.review.items = Array.isArray(data) ? data : (data && (data.candidates || data.items)) || [];
      state.review.error = null;
    } catch (e) {
      state.review.items = [];
      state.review.error = e;
    }
    state.review.loaded = true;
    renderReviewList();
  }

  function renderReviewList() {
    const list = $('review-list');
    clear(list);
    const r = state.review;
    showError($('review-error'), r.error);
    show($('review-none'), r.loaded && !r.error && r.items.length === 0);
    for (const item of r.items) {
      const current = r.current && r.current.id === item.id;
      list.append(
        el(
          'li',
          { className: 'review-item' + (current ? ' current' : ''), dataset: { id: item.id, status: item.status } },
          el('span', { className: 'subject', text: describeSubject(item.subject) }),
          ' ',
          badge(word('review_', item.status), 'review-' + item.status),
          el('span', { className: 'muted small', text: ' ' + item.tenant + ' · ' + item.id }),
          el('div', { className: 'muted small', text: item.reason || '' }),
          el('button', { type: 'button', className: 'open-candidate', text: t('open'), onclick: () => openReview(item.id) }),
        ),
      );
    }
  }

  async function openReview(id) {
    showError($('review-action-error'), null);
    try {
      const { data } = await api('GET', '/v1/review/' + encodeURIComponent(id));
      state.review.current = data;
    } catch (e) {
      state.review.current = null;
      showError($('review-error'), e);
    }
    renderReviewList();
    renderReviewDetail();
  }

  function renderReviewDetail() {
    const item = state.review.current;
    const box = $('review-detail');
    show(box, !!item);
    if (!item) return;
    box.dataset.id = item.id;
    box.dataset.status = item.status;
    $('review-subject').textContent = describeSubject(item.subject);
    $('review-tenant').textContent = item.tenant;
    const st = $('review-status');
    st.textContent = word('review_', item.status);
    st.className = 'badge review-' + item.status;
    $('review-reason').textContent = item.reason || '';
    const decision = $('review-decision');
    if (item.decision) {
      const d = item.decision;
      decision.textContent =
        t('decided', { verdict: word('verdict_', d.verdict), by: d.by, at: d.at }) +
        (d.note ? ' — ' + t('decided_note', { note: d.note }) : '') +
        ' ' + t('ask_again');
      show(decision, true);
    } else {
      decision.textContent = '';
      show(decision, false);
    }
    const list = $('review-evidence');
    clear(list);
    for (const e of item.evidence || []) {
      list.append(
        el(
          'li',
          { className: 'evidence-item', dataset: { docId: e.doc_id, version: e.version, status: e.status } },
          el(
            'div',
            { className: 'evidence-head' },
            el('code', { className: 'evidence-ref', text: ref(e.doc_id, e.version) }),
            ' ',
            badge(word('doc_', e.status), 'doc-' + e.status),
            ' ',
            el('span', { text: e.title || '' }),
            e.chunk_id ? el('span', { className: 'muted small', text: ' ' + e.chunk_id }) : null,
          ),
          el('blockquote', { className: 'evidence-text', lang: 'zh-CN', text: e.text || '' }),
        ),
      );
    }
  }

  async function decide(verdict) {
    const item = state.review.current;
    if (!item) return;
    const buttons = [$('review-approve'), $('review-reject')];
    buttons.forEach((b) => (b.disabled = true));
    showError($('review-action-error'), null);
    try {
      await api('POST', '/v1/review/' + encodeURIComponent(item.id) + '/' + verdict, {
        note: $('review-note').value.trim(),
      });
      $('review-note').value = '';
      await openReview(item.id);
      await loadReview();
    } catch (e) {
      showError($('review-action-error'), e);
    } finally {
      buttons.forEach((b) => (b.disabled = false));
    }
  }

  // ---------------------------------------------------------------- start

  function start() {
    state.lang = initialLanguage();
    $('lang-toggle').addEventListener('click', () => {
      state.lang = state.lang === 'zh' ? 'en' : 'zh';
      localStorage.setItem(LANG_STORE, state.lang);
      applyLanguage();
    });
    $('login-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const key = $('api-key').value.trim();
      if (key) signIn(key);
    });
    $('sign-out').addEventListener('click', signOut);
    for (const tab of document.querySelectorAll('.tab')) {
      tab.addEventListener('click', () => switchView(tab.dataset.view));
    }
    $('ask-form').addEventListener('submit', ask);
    $('question').addEventListener('keydown', (e) => {
      // Enter asks; Shift+Enter is a new line; never while an IME is composing
      // (Chinese input confirms its candidates with Enter).
      if (e.key === 'Enter' && !e.shiftKey && !e.isComposing && e.keyCode !== 229) {
        e.preventDefault();
        $('ask-form').requestSubmit();
      }
    });
    $('review-refresh').addEventListener('click', loadReview);
    $('review-all').addEventListener('change', loadReview);
    $('review-approve').addEventListener('click', () => decide('approve'));
    $('review-reject').addEventListener('click', () => decide('reject'));
    applyLanguage();
    if (sessionStorage.getItem(KEY_STORE)) {
      probe().then((who) => {
        if (who === 'unauthorized' || who === 'unknown_principal') {
          sessionStorage.removeItem(KEY_STORE);
          showLogin(t(who === 'unauthorized' ? 'session_expired' : 'login_unknown_principal'));
        } else {
          state.admin = who === 'admin';
          enterApp();
        }
      });
    } else {
      showLogin(null);
    }
  }

  start();
})();
