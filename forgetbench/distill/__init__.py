"""SMaLL-100-style distillation of students."""
