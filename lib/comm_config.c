/* rcollConfig_t as the library reads it. NCCL's conventions: the
 * initializer sets every field to RCOLL_CONFIG_UNDEF_INT or _PTR, so that a
 * field the user left alone is told from one set to the default's value; and
 * `size` is the struct as the caller's header had it, so that a program built
 * against an older, shorter rcollConfig_t keeps working: its config is read
 * only up to its size, and the fields it does not have stay undefined. Every
 * entry point reads the user's config once, through here, into a full copy;
 * nothing else looks at the user's struct. */
#include <string.h>

#include "comm.h"
#include "error.h"

/* The shortest config accepted: size, magic and version, no option. */
#define CONFIG_MIN_SIZE offsetof(rcollConfig_t, blocking)

rcollResult_t rcoll_config_read(const char *fn, const rcollConfig_t *user, rcollConfig_t *out) {
  *out = (rcollConfig_t)RCOLL_CONFIG_INITIALIZER;
  if (user == NULL)
    return rcollSuccess;
  if (user->magic != RCOLL_CONFIG_MAGIC)
    return rcoll_error(rcollInvalidArgument, "%s: config was not set up with RCOLL_CONFIG_INITIALIZER "
                       "(magic 0x%x)", fn, user->magic);
  if (user->size < CONFIG_MIN_SIZE)
    return rcoll_error(rcollInvalidArgument, "%s: config size %zu is below the smallest rcollConfig_t "
                       "(%zu bytes)", fn, user->size, (size_t)CONFIG_MIN_SIZE);
  if (user->size > sizeof *out)
    return rcoll_error(rcollInvalidArgument, "%s: config is %zu bytes, more than this library's "
                       "rcollConfig_t (%zu): the program was built against a newer rcoll.h", fn,
                       user->size, sizeof *out);
  memcpy(out, user, user->size);
  out->size = sizeof *out;
  if (out->blocking == 0)
    return rcoll_error(rcollInvalidArgument, "%s: non-blocking communicators (blocking=0) are not "
                       "supported yet", fn);
  if (out->blocking != RCOLL_CONFIG_UNDEF_INT && out->blocking != 1)
    return rcoll_error(rcollInvalidArgument, "%s: config blocking %d must be 0 or 1", fn, out->blocking);
  if (out->timeoutMs != RCOLL_CONFIG_UNDEF_INT && out->timeoutMs < 0)
    return rcoll_error(rcollInvalidArgument, "%s: config timeoutMs %d must be 0 (RCOLL_TIMEOUT) or more",
                       fn, out->timeoutMs);
  if (out->splitShare != RCOLL_CONFIG_UNDEF_INT && out->splitShare != 0 && out->splitShare != 1)
    return rcoll_error(rcollInvalidArgument, "%s: config splitShare %d must be 0 or 1", fn, out->splitShare);
  return rcollSuccess;
}
