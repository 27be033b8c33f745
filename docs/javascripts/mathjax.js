// MathJax settings for pymdownx.arithmatex (generic mode): arithmatex wraps each equation of a
// page in an element of class "arithmatex" with \( \) or \[ \] delimiters; MathJax typesets only
// those elements, so a dollar sign elsewhere on a page stays text.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};
