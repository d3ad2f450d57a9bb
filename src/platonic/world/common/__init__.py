"""What the image and the audio world share: the frozen sentence encoder (`text`) and the caption cache
(`captions`), the heads (`heads`) and layers (`blocks`) their towers are built from, the pre-training
losses (`losses`), the storage of weights (`weights`), a task's type (`tasks`) and the build jobs'
worker side (`jobs`). `image/` and `audio/` import this package and nothing of each other."""
