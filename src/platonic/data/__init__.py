"""Data the library draws from: the paper's tasks by name (`tasks`), data sources behind one string
(`sources`: image folders, hf:, torchvision:), decoding the paper's way (`images`), and the seeded
probe and control draws (`probes`, method.md §1.6)."""
