"""Scoring rules with no model inside, below everything that scores: the embedded world's evaluator,
the rewards and the suites all import from here, and this package imports nothing of jsbench but its
error types and the io / splits helpers.

- `jsbench.scoring.geneval`: GenEval's verdict rules (`Detection`, `relative_position`,
  `group_detections`, `evaluate_detections`) and its task, relation, class and colour tables.
- `jsbench.scoring.geneval_prompts`: GenEval's prompt generator and metadata files.
- `jsbench.scoring.text`: a prompt's quoted spans and MARIO-Eval's text-rendering metrics.
"""
