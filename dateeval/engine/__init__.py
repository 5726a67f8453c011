"""The engine: what runs a sweep, top to bottom.

``plan`` says what a sweep is and what is left of it (the spec, the units); ``sweep`` is the driver (leases, the
store's writes, the local executor); ``ray_executor`` sends units to Ray actors instead; ``worker`` renders a unit's
prompts on a loaded model and runs them; ``answers`` hands a task's requests to a backend. It sits above the tasks
and the backends and beside the store, which it writes; nothing in the read side imports it.
"""
