# rcoll configure helpers, read through aclocal.m4 (hand-written, so that
# autoreconf skips aclocal and needs only autoconf, not automake).

# RCOLL_CHECK_DEP(name, VAR, header, function, libs, description)
# Adds --with-<name>[=yes|no|DIR]. With the default ("check") the dependency is
# used when <header> compiles and <function> links with <libs>; "yes" or a DIR
# makes it mandatory; "no" skips it. Sets RCOLL_HAVE_<VAR> (0/1), <VAR>_CFLAGS
# and <VAR>_LIBS, all substituted into config.mk.
AC_DEFUN([RCOLL_CHECK_DEP], [
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
