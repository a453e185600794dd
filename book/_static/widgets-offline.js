// Loaded between require.js and the ipywidgets HTML manager (_config.yml: nb_ipywidgets_js),
// on pages whose notebook saved widget state.
(function () {
  // 1. The manager (served from _static/jupyter-widgets/, see `make vendor`) loads its icon
  //    fonts relative to its RequireJS module name; map that name to where this site serves
  //    it, so nothing comes from a CDN and nothing 404s. data-content_root is Sphinx's path
  //    from this page to the site's root.
  var root = document.documentElement.getAttribute("data-content_root") || "";
  require.config({
    paths: { "@jupyter-widgets/html-manager/dist": root + "_static/jupyter-widgets" },
  });

  // 2. Widgets typeset their labels (e.g. "d_k") with MathJax 2's MathJax.Hub.Queue; the book
  //    loads MathJax 3, which has no Hub ("Cannot read properties of undefined (reading
  //    'Queue')"). Translate the one call they make into MathJax 3's typesetPromise.
  document.addEventListener("DOMContentLoaded", function () {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup) return;
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
            mj.startup.promise = mj.startup.promise.then(function () {
              return mj.typesetPromise([job[2]]);
            });
          }
        });
      },
    };
  });
})();
