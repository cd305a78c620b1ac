"""Everything that becomes tensors and trains: trees, encodings, layers and LightningModules."""
