// Keyboard-driven review: the page's data- attributes say where we are; nothing here builds
// HTML from sample text (the server escaped it all).
(function () {
  "use strict";
  const body = document.body;
  const page = body.dataset.page;
  const size = Number(body.dataset.size || 0);
  const verdicts = { "1": "right", "2": "should_pass", "3": "should_fail", "4": "unsure" };
  const reviewerBox = document.getElementById("reviewer");
  reviewerBox.value = localStorage.getItem("veriloop-reviewer") || body.dataset.reviewer || "";
  reviewerBox.addEventListener("change", () => localStorage.setItem("veriloop-reviewer", reviewerBox.value.trim()));

  function typing(target) {
    return target && (target.tagName === "TEXTAREA" || target.tagName === "INPUT");
  }

  function go(position) {
    if (position >= 0 && position < size) window.location.assign("/review/" + position);
  }

  async function judge(verdict) {
    const status = document.getElementById("status");
    const reviewer = reviewerBox.value.trim();
    if (!reviewer) {
      status.textContent = "type your name in the reviewer box first";
      reviewerBox.focus();
      return;
    }
    localStorage.setItem("veriloop-reviewer", reviewer);
    const position = Number(body.dataset.position);
    const note = document.getElementById("note").value;
    status.textContent = "saving...";
    const answer = await fetch("/api/judgments", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ position: position, verdict: verdict, note: note, reviewer: reviewer }),
    });
    if (!answer.ok) {
      status.textContent = "not saved: HTTP " + answer.status + " " + (await answer.text());
      return;
    }
    const saved = await answer.json();
    body.dataset.saved = String(saved.saved);
    status.textContent = "saved as judgment " + saved.saved;
    for (const button of document.querySelectorAll("button.verdict")) {
      button.classList.toggle("chosen", button.dataset.verdict === verdict);
    }
    if (position + 1 < size) go(position + 1);
    else window.location.assign("/stats");
  }

  function reviewKeys(event) {
    const key = event.key;
    if (key in verdicts) judge(verdicts[key]);
    else if (key === "j") go(Number(body.dataset.position) + 1);
    else if (key === "k") go(Number(body.dataset.position) - 1);
    else if (key === "n") document.getElementById("note").focus();
    else if (key === "g") {
      const gold = document.getElementById("gold");
      if (gold) gold.open = !gold.open;
    } else if (key === "t") {
      const turns = document.querySelectorAll("details.turn");
      const open = Array.from(turns).some((turn) => !turn.open);
      turns.forEach((turn) => (turn.open = open));
    } else return false;
    return true;
  }

  let selected = 0;
  function select(index) {
    const rows = document.querySelectorAll("tr.pick");
    if (!rows.length) return;
    selected = Math.max(0, Math.min(rows.length - 1, index));
    rows.forEach((row, i) => row.classList.toggle("selected", i === selected));
    rows[selected].scrollIntoView({ block: "nearest" });
  }

  function queueKeys(event) {
    if (event.key === "j") select(selected + 1);
    else if (event.key === "k") select(selected - 1);
    else if (event.key === "Enter") go(selected);
    else return false;
    return true;
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (typing(event.target)) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    let handled = false;
    if (event.key === "q") window.location.assign("/");
    else if (event.key === "s") window.location.assign("/stats");
    else if (page === "review") handled = reviewKeys(event);
    else if (page === "queue") handled = queueKeys(event);
    if (handled) event.preventDefault();
  });

  for (const button of document.querySelectorAll("button.verdict")) {
    button.addEventListener("click", () => judge(button.dataset.verdict));
  }
  if (page === "queue") select(0);
  body.dataset.ready = "1";
})();
