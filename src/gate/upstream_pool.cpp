#include "gate/upstream_pool.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace ot::gate {

bool idle_conn_dead(int fd) {
    char b;
    const ssize_t n = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0) return !(errno == EAGAIN || errno == EWOULDBLOCK);
    // 0: orderly close; > 0: bytes nobody asked for, the stream is out of step.
    return true;
}

}  // namespace ot::gate
