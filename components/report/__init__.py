"""The run report: one self-contained HTML file per run, read from its own artifacts.

`contents` reads artifacts into plain dataclasses, `plots` draws them with
matplotlib into inline SVG, `render` fills the HTML template. The file loads
nothing from the network: no scripts, fonts or stylesheets from elsewhere.
"""
