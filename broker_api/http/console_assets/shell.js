// The page frame both consoles share: header, token box, tabs (by URL hash), one view at a time.

import { errorBox, getToken, setToken } from "./api.js";
import { h } from "./dom.js";

function tokenBox(onChange) {
  const input = h("input", { id: "token", type: "password", placeholder: "user:secret", value: getToken(),
    autocomplete: "off", size: 24 });
  const state = h("span", { id: "token-state" }, getToken() ? "token set" : "no token");
  const save = (value) => {
    setToken(value);
    input.value = value;
    state.textContent = value ? "token set" : "no token";
    onChange();
  };
  const submit = (e) => { e.preventDefault(); save(input.value.trim()); };
  return h("form", { id: "token-form", class: "token", onsubmit: submit },
    h("label", { for: "token" }, "Token"), input, h("button", { type: "submit" }, "Use"),
    h("button", { type: "button", onclick: () => save("") }, "Clear"), state);
}

// `views`: {hash: {title, render(root) -> optional cleanup}}; the first is the default.
// `identify()` names the server in the header (any error leaves it blank: the view shows errors).
export function startConsole(title, views, identify = async () => "") {
  const names = Object.keys(views);
  const main = h("main", { id: "view" });
  const nav = h("nav", {}, names.map((n) => h("a", { href: `#${n}`, "data-view": n }, views[n].title)));
  const subtitle = h("span", { id: "subtitle" });
  let cleanup = null;
  let generation = 0;

  const show = async () => {
    const name = names.includes(location.hash.slice(1)) ? location.hash.slice(1) : names[0];
    if (cleanup) cleanup();
    cleanup = null;
    generation += 1;
    const mine = generation;
    nav.querySelectorAll("a").forEach((a) => a.classList.toggle("active", a.dataset.view === name));
    const root = h("div", { "data-loaded": "false", "data-view": name });
    main.replaceChildren(root);
    identify().then((text) => { if (text) subtitle.textContent = text; }, () => {});
    try {
      const done = await views[name].render(root);
      if (mine === generation) cleanup = typeof done === "function" ? done : null;
      else if (typeof done === "function") done();
    } catch (err) {
      root.append(errorBox(err));
    }
    root.dataset.loaded = "true";
  };

  const refresh = h("button", { id: "refresh", type: "button", onclick: show }, "Refresh");
  document.body.replaceChildren(
    h("header", {}, h("h1", {}, title), subtitle, tokenBox(show)), h("div", { class: "bar" }, nav, refresh), main);
  window.addEventListener("hashchange", show);
  show();
}
