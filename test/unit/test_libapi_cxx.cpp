// include/idpool.h in a C++ translation unit: it compiles inside its
// extern "C" (idpool_options_init is an inline function of the header)
// and links against libidpool.
#include <cstring>

#include "idpool.h"

int main()
{
    struct idpool_options o;
    struct idpool_app *a = nullptr;

    idpool_options_init(&o);
    if (o.size != sizeof(o) || o.timeout_ms != 0 || o.key_prefix != nullptr)
        return 1;
    if (idpool_app_get(nullptr, "user", &a) != IDPOOL_EINVAL || a != nullptr)
        return 1;
    enum idpool_rc rc = IDPOOL_ETIMEDOUT;
    return std::strcmp(idpool_strerror(rc), "unknown error") == 0 ? 1 : 0;
}
