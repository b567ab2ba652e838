/* Range sliders next to the controls a reader scrubs (issue 14).  The named control (a <select>
 * or a number <input>) stays the one value holder and the exact-entry box; the slider is an extra,
 * unnamed <input type="range" data-for="NAME" data-scale="…"> rendered by templates/demo.html
 * (visible from the first paint; hidden without scripts by static/noscript.css) and kept in sync
 * both ways.  Scales:
 *   index   a select's options, in order (position = option index)
 *   lin     the number itself (the control's min / max / step)
 *   log2    powers of two: position k is 2^k (sizes spanning decades); typed values stay exact
 *   symlog  ±(10^(|p|/P·log10(1 + max)) − 1), P = the slider's max: fine near 0, reaching ±max
 */

function symlogValue(pos, slider) {
  const P = Number(slider.max), top = Number(slider.getAttribute("data-max"));
  const v = Math.sign(pos) * (10 ** (Math.abs(pos) / P * Math.log10(1 + top)) - 1);
  return Math.abs(v) >= top ? Math.sign(v) * top : Number(v.toPrecision(2));
}

function symlogPos(v, slider) {
  const P = Number(slider.max), top = Number(slider.getAttribute("data-max"));
  return Math.round(Math.sign(v) * Math.log10(1 + Math.min(Math.abs(v), top)) / Math.log10(1 + top) * P);
}

/** Control value for the slider's position (a string, as the control holds it). */
function valueAt(slider, control) {
  const pos = Number(slider.value);
  switch (slider.getAttribute("data-scale")) {
    case "index": return control.options[pos] ? control.options[pos].value : control.value;
    case "log2": return String(2 ** pos);
    case "symlog": return String(symlogValue(pos, slider));
    default: return slider.value;
  }
}

/** Slider position for the control's value; null when the value is not a number. */
function positionOf(slider, control) {
  if (slider.getAttribute("data-scale") === "index") return control.selectedIndex;
  const v = Number(control.value);
  if (control.value === "" || !Number.isFinite(v)) return null;
  switch (slider.getAttribute("data-scale")) {
    case "log2": return v > 0 ? Math.round(Math.log2(v)) : Number(slider.min);
    case "symlog": return symlogPos(v, slider);
    default: return v;
  }
}

function describe(slider, control) {
  const text = control.tagName === "SELECT"
    ? (control.selectedOptions[0] ? control.selectedOptions[0].textContent : control.value)
    : control.value;
  slider.setAttribute("aria-valuetext", text);
}

/** The named control of a slider. */
export function controlOf(slider) {
  return slider.form ? slider.form.elements.namedItem(slider.getAttribute("data-for")) : null;
}

/** Slider moved: write its value into the named control. */
export function fromSlider(slider) {
  const control = controlOf(slider);
  if (!control) return null;
  const value = valueAt(slider, control);
  if (control.value !== value) control.value = value;
  describe(slider, control);
  return control;
}

/** The named control changed (typed, chosen, restored, set by a preset): move its slider. */
export function toSlider(control) {
  if (!control.form || !control.name) return;
  for (const slider of control.form.querySelectorAll("input[type=range][data-for]")) {
    if (slider.getAttribute("data-for") !== control.name) continue;
    const pos = positionOf(slider, control);
    if (pos !== null) slider.value = String(pos);   // the browser clamps it to min…max
    slider.disabled = control.disabled;
    describe(slider, control);
  }
}

/** The values one step away from the control's on its slider (one per side, as a drag would
 * produce them), or null when it has no slider. */
export function valuesBeside(control) {
  if (!control.form || !control.name) return null;
  for (const slider of control.form.querySelectorAll("input[type=range][data-for]")) {
    if (slider.getAttribute("data-for") !== control.name) continue;
    const pos = positionOf(slider, control);
    if (pos === null) return [];
    // A detached copy of the slider moved by one step: the browser clamps, snaps and spells the
    // position exactly as it would for the reader's drag.
    const probe = slider.cloneNode(false);
    const out = [];
    for (const dir of [1, -1]) {
      probe.value = String(pos);
      if (dir > 0) probe.stepUp(); else probe.stepDown();
      const v = valueAt(probe, control);
      if (v !== control.value && !out.includes(v)) out.push(v);
    }
    return out;
  }
  return null;
}

/** Show the sliders of a form and align them with their controls. */
export function setupSliders(form) {
  for (const slider of form.querySelectorAll("input[type=range][data-for]")) {
    const control = controlOf(slider);
    if (!control) continue;
    slider.hidden = false;
    toSlider(control);
  }
}
