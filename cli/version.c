/*
 * version.c - silvic-ring --version: the version, the git revision it was
 * built from, the compiled-in features, and the versions of the libraries
 * it was built with and runs with (as curl -V and iperf3 -v show them).
 * The one file besides the HTTP modules that includes the libraries'
 * headers, and only for their version macros and calls.
 */
#include <stdio.h>

#ifdef SR_HAVE_HTTP
#include <curl/curl.h>
#include <microhttpd.h>
#endif
#ifdef SR_HAVE_CRYPTO
#include <openssl/crypto.h>
#include <openssl/opensslv.h>
#endif

#include "cli.h"
#include "usage.h"

/* `git describe --always --dirty` at build time (the Makefile passes it);
 * empty in a tarball without REVISION. */
#ifndef SR_REVISION
#define SR_REVISION ""
#endif

/* Each library as it was at build time (its header) and at run time. */
struct library {
	const char *name;
	char built[64];
	char running[64];
};

static size_t
libraries(struct library *out)
{
	size_t n = 0;
#ifdef SR_HAVE_HTTP
	out[n].name = "libcurl";
	snprintf(out[n].built, sizeof(out[n].built), "%s", LIBCURL_VERSION);
	snprintf(out[n].running, sizeof(out[n].running), "%s",
	    curl_version_info(CURLVERSION_NOW)->version);
	n++;
	/* MHD_VERSION is 0xMMmmpp00 in hex digits: 0x00097500 is 0.9.75. */
	out[n].name = "libmicrohttpd";
	snprintf(out[n].built, sizeof(out[n].built), "%x.%x.%x",
	    (unsigned)(MHD_VERSION >> 24) & 0xff,
	    (unsigned)(MHD_VERSION >> 16) & 0xff,
	    (unsigned)(MHD_VERSION >> 8) & 0xff);
	snprintf(out[n].running, sizeof(out[n].running), "%s",
	    MHD_get_version());
	n++;
#endif
#ifdef SR_HAVE_CRYPTO
	out[n].name = "libcrypto";
#ifdef OPENSSL_VERSION_STR
	snprintf(out[n].built, sizeof(out[n].built), "%s",
	    OPENSSL_VERSION_STR);
	snprintf(out[n].running, sizeof(out[n].running), "%s",
	    OpenSSL_version(OPENSSL_VERSION_STRING));
#else
	snprintf(out[n].built, sizeof(out[n].built), "%s",
	    OPENSSL_VERSION_TEXT);
	snprintf(out[n].running, sizeof(out[n].running), "%s",
	    OpenSSL_version(OPENSSL_VERSION));
#endif
	n++;
#endif
	(void)out;
	return n;
}

static void
print_libraries(const char *label, const struct library *libs, size_t n,
    int running)
{
	printf("%s:", label);
	for (size_t i = 0; i < n; i++)
		printf("%s %s %s", i > 0 ? "," : "", libs[i].name,
		    running ? libs[i].running : libs[i].built);
	if (n == 0)
		printf(" no optional library");
	printf("\n");
}

int
usage_version(void)
{
	struct library libs[3];
	size_t n = libraries(libs);

	printf("silvic-ring %s\n", SR_VERSION);
	printf("features: ring core, launch, bench, http rendezvous: %s, "
	    "authentication: %s\n", SR_BUILD_HTTP ? "yes" : "no",
	    sr_auth_built_in() ? "yes" : "no");
	if (SR_REVISION[0] != '\0')
		printf("revision: %s\n", SR_REVISION);
	print_libraries("built with", libs, n, 0);
	if (n > 0)
		print_libraries("running with", libs, n, 1);
	return EXIT_OK;
}
