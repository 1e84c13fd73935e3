// amem inspector: the two things a page does beyond links and GET forms.
// 1. Log in with a key: the key is sent once as a Bearer header; the server answers with a
//    session cookie (HttpOnly, SameSite=Strict) and the page forgets the key.
// 2. Actions (undo a supersession): a dry run first, then a confirmed change, each a JSON POST
//    carrying the page's CSRF token. The guard refuses a read-only key; the reply is shown.
"use strict";
(function () {
  function csrf() {
    var meta = document.querySelector('meta[name="amem-csrf"]');
    return meta ? meta.getAttribute("content") : "";
  }
  // where this page's session lives (/ui/s/<key>): its cookie is sent under that path only
  function base() {
    var meta = document.querySelector('meta[name="amem-base"]');
    return meta ? meta.getAttribute("content") : "/ui";
  }
  function post(path, body, extra) {
    var headers = { "Content-Type": "application/json", "X-Amem-Csrf": csrf() };
    Object.keys(extra || {}).forEach(function (k) { headers[k] = extra[k]; });
    return fetch(path, { method: "POST", headers: headers, body: JSON.stringify(body),
                         credentials: "same-origin" })
      .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, data: j }; }); });
  }
  function say(region, text, cls) {
    region.textContent = text;
    region.className = "preview " + (cls || "");
  }

  var login = document.getElementById("key-login");
  if (login) {
    login.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var field = document.getElementById("key");
      var key = field.value.trim();
      field.value = "";
      post("/ui/login", {}, { "Authorization": "Bearer " + key }).then(function (res) {
        if (res.ok) { window.location.assign(res.data.next); return; }
        document.getElementById("login-error").textContent =
          (res.data.error && res.data.error.message) || "login refused";
      });
    });
  }

  var logout = document.getElementById("logout-now");
  if (logout) {
    logout.addEventListener("click", function () {
      post(base() + "/logout", {}).then(function (res) {
        window.location.assign((res.data && res.data.next) || "/ui/login");
      });
    });
  }

  document.querySelectorAll(".action").forEach(function (box) {
    var dry = box.querySelector("button.dry-run");
    var region = box.querySelector(".preview");
    var path = base() + "/api/" + box.getAttribute("data-action");
    var body = Object.assign({}, box.dataset);
    delete body.action;
    dry.addEventListener("click", function () {
      post(path, body).then(function (res) {
        if (!res.ok) { say(region, "Refused: " + res.data.error.message, "bad"); return; }
        region.innerHTML = "";
        var p = document.createElement("p");
        p.textContent = "Dry run: " + res.data.effect + ". Nothing has changed yet.";
        region.appendChild(p);
        if (res.data.diff) {
          var pre = document.createElement("pre");
          pre.className = "diff";
          pre.textContent = res.data.diff;
          region.appendChild(pre);
        }
        var yes = document.createElement("button");
        yes.type = "button"; yes.className = "confirm"; yes.textContent = "Confirm: apply this change";
        var no = document.createElement("button");
        no.type = "button"; no.className = "cancel"; no.textContent = "Cancel";
        region.appendChild(yes); region.appendChild(no);
        yes.focus();
        no.addEventListener("click", function () { say(region, "Cancelled; nothing changed."); dry.focus(); });
        yes.addEventListener("click", function () {
          var sure = Object.assign({}, body, { confirm: true, plan: res.data.plan });
          post(path, sure).then(function (done) {
            if (!done.ok) { say(region, "Refused: " + done.data.error.message, "bad"); return; }
            say(region, "Done: " + (done.data.done || ("note " + done.data.id + " is current again")) + ".", "ok");
          });
        });
      });
    });
  });
})();
