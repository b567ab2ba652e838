/* Language preference.
 * On site/index.html (links a.lang-choose): go to the reader's language unless they asked to
 * choose (index.html?choose): a remembered choice first, else navigator.languages (zh* -> zh).
 * On every page: clicking a language link (a.lang-choose / a.lang-switch) remembers the choice. */
(function () {
  "use strict";
  var KEY = "tp-lang";
  function remember(ev) {
    try { localStorage.setItem(KEY, ev.currentTarget.getAttribute("data-lang")); } catch (e) { /* storage off */ }
  }
  var all = document.querySelectorAll("a.lang-switch[data-lang], a.lang-choose[data-lang]");
  for (var i = 0; i < all.length; i++) all[i].addEventListener("click", remember);

  var links = document.querySelectorAll("a.lang-choose[data-lang]");
  if (!links.length || /[?&]choose(=|&|$)/.test(window.location.search)) return;
  var byLang = {};
  for (var k = 0; k < links.length; k++) byLang[links[k].getAttribute("data-lang")] = links[k];
  var choice = null;
  try { choice = localStorage.getItem(KEY); } catch (e) { choice = null; }
  if (!choice || !byLang[choice]) {
    choice = null;
    var prefs = navigator.languages && navigator.languages.length ? navigator.languages : [navigator.language || ""];
    for (var j = 0; j < prefs.length && !choice; j++) {
      var code = String(prefs[j]).toLowerCase().split("-")[0];
      if (byLang[code]) choice = code;
    }
  }
  if (choice) window.location.replace(byLang[choice].getAttribute("href") + window.location.hash);
})();
