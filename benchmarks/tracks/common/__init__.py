"""What the tracks share: continual-learning metrics (`continual`) and a prompted ViT (`prompted_vit`)."""
