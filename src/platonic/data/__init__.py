"""Data the library draws from: the paper's tasks by name (`tasks`), data sources behind one string
(`sources`: image and sound folders, hf:, torchvision:), decoding the paper's way (`images`), sound as
canonical 16 kHz clips (`audio`), and the seeded probe and control draws (`probes`, method.md §1.6)."""
