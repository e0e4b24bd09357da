# rcoll: this file is written by hand. Because it exists and was not made by
# the aclocal tool, autoreconf skips that tool, so building rcoll needs autoconf
# but not automake. Keep rcoll's own macros in m4/.
m4_include([m4/rcoll.m4])
