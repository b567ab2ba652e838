/* Language preference.
 * On site/index.html (<meta name="tp-langs" content="CODE=HREF ...">): go to the reader's language
 * unless they asked to choose (index.html?choose): a remembered choice first, else
 * navigator.languages (zh* -> zh).  That page loads this script in <head>, before the stylesheet,
 * without defer: the reader who is sent on never waits for the choice page's own CSS or paint.
 * On every page: clicking a language link (a.lang-choose / a.lang-switch) remembers the choice,
 * and a folded deep dive (details.deep) or a demo's folded tables (details.tables-fold) open when the
 * URL's #anchor points into them (a link, the contents, a language switch that keeps the reader's
 * place) and while the page is printed. */
(function () {
  "use strict";
  var KEY = "tp-lang";

  function target() {
    var meta = document.querySelector('meta[name="tp-langs"]');
    if (!meta || /[?&]choose(=|&|$)/.test(window.location.search)) return null;
    var byLang = {};
    var pairs = (meta.getAttribute("content") || "").split(/\s+/);
    for (var i = 0; i < pairs.length; i++) {
      var eq = pairs[i].indexOf("=");
      if (eq > 0) byLang[pairs[i].slice(0, eq)] = pairs[i].slice(eq + 1);
    }
    var choice = null;
    try { choice = localStorage.getItem(KEY); } catch (e) { choice = null; }
    if (choice && byLang[choice]) return byLang[choice];
    var prefs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ""];
    for (var j = 0; j < prefs.length; j++) {
      var code = String(prefs[j]).toLowerCase().split("-")[0];
      if (byLang[code]) return byLang[code];
    }
    return null;
  }

  var href = target();
  if (href) { window.location.replace(href + window.location.hash); return; }

  function remember(ev) {
    try { localStorage.setItem(KEY, ev.currentTarget.getAttribute("data-lang")); } catch (e) { /* storage off */ }
  }
  function wire() {
    var all = document.querySelectorAll("a.lang-switch[data-lang], a.lang-choose[data-lang]");
    for (var i = 0; i < all.length; i++) all[i].addEventListener("click", remember);
  }
  function reveal() {
    var id = window.location.hash.slice(1);
    var el = null;
    try { el = id && document.getElementById(decodeURIComponent(id)); } catch (e) { el = null; }
    // every closed fold around it: a deep dive, a demo's folded tables, or both
    var opened = false;
    for (var d = el && el.closest ? el.closest(FOLDS) : null; d; d = d.parentElement && d.parentElement.closest(FOLDS)) {
      if (!d.open) { d.open = true; opened = true; }
    }
    if (opened) el.scrollIntoView();
  }
  var FOLDS = "details.deep, details.tables-fold";
  var printed = [];
  window.addEventListener("beforeprint", function () {
    printed = Array.prototype.slice.call(document.querySelectorAll("details.deep:not([open]), details.tables-fold:not([open])"));
    for (var i = 0; i < printed.length; i++) printed[i].open = true;
  });
  window.addEventListener("afterprint", function () {
    for (var i = 0; i < printed.length; i++) printed[i].open = false;
    printed = [];
  });
  window.addEventListener("hashchange", reveal);
  function ready() { wire(); reveal(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", ready);
  else ready();
})();
