# rcoll configure helpers, included by configure.ac itself (m4_include), so
# that autoconf alone builds configure: no aclocal.m4, no automake.

# RCOLL_CHECK_DEP(name, VAR, header, function, libs, description, [linked])
# Adds --with-<name>[=yes|no|DIR]. With the default ("check") the dependency is
# used when <header> compiles and <function> links with <libs>; "yes" or a DIR
# makes it mandatory; "no" skips it. Sets RCOLL_HAVE_<VAR> (0/1), <VAR>_CFLAGS
# and <VAR>_LIBS and registers VAR, under the label <name>, with
# RCOLL_REGISTER_DEP (see there for "linked").
AC_DEFUN([RCOLL_CHECK_DEP], [
RCOLL_FIND_DEP([$1], [$2], [$3], [$4], [$5], [$6])
RCOLL_REGISTER_DEP([$2], [$7], [$1])
])

# RCOLL_FIND_DEP(name, VAR, header, function, libs, description)
# RCOLL_CHECK_DEP without registering: for tools the library never links
# (Criterion).
AC_DEFUN([RCOLL_FIND_DEP], [
AC_ARG_WITH([$1],
  [AS_HELP_STRING([--with-$1@<:@=yes|no|DIR@:>@],
                  [$6 (default: use when found; DIR is an install prefix)])],
  [], [with_$1=check])
RCOLL_HAVE_$2=0
$2_CFLAGS=
$2_LIBS=
AS_CASE([$with_$1],
  [no], [],
  [yes|check], [_RCOLL_TRY_DEP([$1], [$2], [$3], [$4], [$5], [], [])],
  [AS_IF([test -d "$with_$1"], [],
         [AC_MSG_ERROR([--with-$1=$with_$1: no such directory])])
   rcoll_libdir="$with_$1/lib"
   AS_IF([test -d "$with_$1/lib64"], [rcoll_libdir="$with_$1/lib64"])
   _RCOLL_TRY_DEP([$1], [$2], [$3], [$4], [$5],
                  [-I$with_$1/include], [-L$rcoll_libdir -Wl,-rpath,$rcoll_libdir])])
AS_IF([test "x$with_$1" != xno && test "x$with_$1" != xcheck && test "$RCOLL_HAVE_$2" != 1],
  [AC_MSG_ERROR([$6 was requested (--with-$1=$with_$1) but $3 / $5 were not usable; see config.log])])
AC_SUBST([RCOLL_HAVE_$2])
AC_SUBST([$2_CFLAGS])
AC_SUBST([$2_LIBS])
])

# RCOLL_REGISTER_DEP(VAR, [linked], [label])
# Makes an optional library known to the build without configure.ac,
# config.mk.in or the Makefile naming it: RCOLL_DEPS_OUTPUT writes its
# RCOLL_HAVE_<VAR>, <VAR>_CFLAGS and <VAR>_LIBS lines into config.mk, adds
# -DRCOLL_HAVE_<VAR>=1 to every compile and offers <VAR>_LIBS to the linker
# (under --as-needed) when it was found. "linked" says that library code calls
# it directly, so a static link needs it: it then goes to rcoll.pc's
# Libs.private. Leave it out for a library that is probed but that no object
# calls, or that is loaded with dlopen. With a label, RCOLL_DEPS_SUMMARY
# prints a line for it.
AC_DEFUN([RCOLL_REGISTER_DEP], [
rcoll_deps="$rcoll_deps $1"
m4_if([$2], [linked], [rcoll_linked_deps="$rcoll_linked_deps $1"])
m4_ifnblank([$3], [rcoll_labelled_deps="$rcoll_labelled_deps $1"
rcoll_label_$1='$3'])
])

# RCOLL_DEPS_SUMMARY
# One line per labelled dependency for the summary configure prints last.
AC_DEFUN([RCOLL_DEPS_SUMMARY], [
for rcoll_dep in $rcoll_labelled_deps; do
  eval "rcoll_have=\$RCOLL_HAVE_$rcoll_dep rcoll_libs=\$${rcoll_dep}_LIBS rcoll_label=\$rcoll_label_$rcoll_dep"
  RCOLL_SUMMARY_LINE([$rcoll_label], [$rcoll_have], [$rcoll_libs])
done
])

# RCOLL_TRANSPORTS_CONFIGURE
# Includes transports/*/configure.m4, in name order: each transport checks for
# the libraries it needs (with RCOLL_CHECK_DEP) beside its own code, and
# adding a transport does not touch configure.ac. The list is taken when
# autoconf runs; the Makefile reruns autoconf when a configure.m4 appears.
AC_DEFUN([RCOLL_TRANSPORTS_CONFIGURE], [
m4_map_args_w(m4_esyscmd_s([ls transports/*/configure.m4 2>/dev/null | LC_ALL=C sort]),
              [m4_include(], [)])
])

# RCOLL_DEPS_OUTPUT
# Turns the registered dependencies into the substitutions config.mk.in uses:
# RCOLL_DEPS_MK (its per-dependency lines), RCOLL_DEFS, RCOLL_DEP_CFLAGS,
# RCOLL_DEP_LIBS and RCOLL_PC_LIBS_PRIVATE. Call it once, after every check.
AC_DEFUN([RCOLL_DEPS_OUTPUT], [
RCOLL_DEFS=
RCOLL_DEP_CFLAGS=
RCOLL_DEP_LIBS=
RCOLL_DEPS_MK=
RCOLL_PC_LIBS_PRIVATE=
for rcoll_dep in $rcoll_deps; do
  eval "rcoll_have=\$RCOLL_HAVE_$rcoll_dep rcoll_cflags=\$${rcoll_dep}_CFLAGS rcoll_libs=\$${rcoll_dep}_LIBS"
  RCOLL_DEPS_MK="$RCOLL_DEPS_MK
RCOLL_HAVE_$rcoll_dep = $rcoll_have
${rcoll_dep}_CFLAGS = $rcoll_cflags
${rcoll_dep}_LIBS = $rcoll_libs"
  AS_IF([test "$rcoll_have" = 1], [
    RCOLL_DEFS="$RCOLL_DEFS -DRCOLL_HAVE_$rcoll_dep=1"
    RCOLL_DEP_CFLAGS="$RCOLL_DEP_CFLAGS $rcoll_cflags"
    RCOLL_DEP_LIBS="$RCOLL_DEP_LIBS $rcoll_libs"
    AS_CASE([" $rcoll_linked_deps "], [*" $rcoll_dep "*],
            [RCOLL_PC_LIBS_PRIVATE="$RCOLL_PC_LIBS_PRIVATE $rcoll_libs"])
  ])
done
RCOLL_PC_LIBS_PRIVATE=`echo $RCOLL_PC_LIBS_PRIVATE -pthread -lm`
AC_SUBST([RCOLL_DEFS])
AC_SUBST([RCOLL_DEP_CFLAGS])
AC_SUBST([RCOLL_DEP_LIBS])
AC_SUBST([RCOLL_DEPS_MK])
AC_SUBST([RCOLL_PC_LIBS_PRIVATE])
])

# _RCOLL_TRY_DEP(name, VAR, header, function, libs, cppflags, ldflags)
# The function's address goes through a volatile pointer so that an optimising
# compiler cannot drop the reference and let a missing library link anyway.
m4_define([_RCOLL_TRY_DEP], [
rcoll_save_CPPFLAGS=$CPPFLAGS
rcoll_save_LIBS=$LIBS
CPPFLAGS="$CPPFLAGS $6"
LIBS="$7 $5 $LIBS"
AC_MSG_CHECKING([for $1 ($3, $5)])
AC_LINK_IFELSE(
  [AC_LANG_PROGRAM([[#include <$3>]],
                   [[void *volatile rcoll_probe = (void *)&$4; return rcoll_probe == 0;]])],
  [AC_MSG_RESULT([yes])
   RCOLL_HAVE_$2=1
   $2_CFLAGS=`echo $6`
   $2_LIBS=`echo $7 $5`],
  [AC_MSG_RESULT([no])])
CPPFLAGS=$rcoll_save_CPPFLAGS
LIBS=$rcoll_save_LIBS
])

# RCOLL_SUMMARY_LINE(label, have, detail)
AC_DEFUN([RCOLL_SUMMARY_LINE], [
AS_IF([test "$2" = 1],
  [printf '  %-12s yes  %s\n' "$1" "$3"],
  [printf '  %-12s no\n' "$1"])
])
