"""SimPy processes that replay a trace through the hardware, asking a policy's plan."""
