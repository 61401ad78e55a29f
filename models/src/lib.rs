//! Models of forksafe-core: see tests/.
