"""Reading what a run left: the recording, TORCH_TRACE logs (eager and lazy), the event schema.

recording.py (the append-only event log), trace_log.py and trace_lazy.py (the two TORCH_TRACE
readers, sharing trace_lines.py), trace_events.py (one representation for both), event_schema.py
(every event's shape, checked once), lazy_items.py, source_roots.py.

May import (tests/test_structure.py holds it): core/torchtext and core's top-level basics.
"""
