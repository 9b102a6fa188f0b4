/* tests/support/ports.h - free TCP ports for integration tests, so test
 * binaries run side by side: each takes whole blocks of H_PORTS_BLOCK
 * consecutive loopback ports, locked for the life of the process
 * (/tmp/moonkv-ports-N.lock) and checked free when taken. */
#ifndef MKV_TEST_PORTS_H
#define MKV_TEST_PORTS_H

#define H_PORTS_BLOCK 32

/* The first of n (at most H_PORTS_BLOCK) consecutive free ports, all of
 * one block this process now owns; -1 if none could be had. */
int h_free_ports(int n);
int h_free_port(void);   /* h_free_ports(1) */

#endif
