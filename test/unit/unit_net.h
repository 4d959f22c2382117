/*
 * unit_net — loopback sockets for the unit tests of the blocking clients
 * (test_resolve, test_route): a port that refuses connections, or one a
 * fake server of the test listens on.
 */
#ifndef IDPOOL_UNIT_NET_H
#define IDPOOL_UNIT_NET_H

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

/*
 * A loopback socket bound to a free port, listening or not (connections
 * to it are then refused); its port in *port. Exits the test on failure.
 */
static inline int unit_bound(int listening, int *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM, 0);

    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || (listening && listen(s, 8) < 0) ||
        getsockname(s, (struct sockaddr *)&a, &len) < 0) {
        perror("socket");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return s;
}

#endif
