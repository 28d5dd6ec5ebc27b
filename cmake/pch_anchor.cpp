// The empty source of a precompiled-header provider (cmake/MeshtpCompileTime.cmake):
// its object is nothing; the header precompiled for it is what other targets reuse.
