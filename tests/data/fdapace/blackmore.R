# fdapace 0.6.0's FPCA with its defaults for sparse data on carData's
# Blackmore (tests/data/Blackmore.csv: exercise hours of 231 girls at ages 8-18):
# the fitted curves on fdapace's work grid and the model's choices.
#   Rscript tests/data/fdapace/blackmore.R tests/data/Blackmore.csv tests/data/fdapace
suppressMessages(library(fdapace))
args <- commandArgs(TRUE)
d <- read.csv(args[1], colClasses = c(subject = "character"))
ids <- unique(d$subject)
f <- factor(d$subject, levels = ids)
fit <- FPCA(split(d$exercise, f), split(d$age, f), list(dataType = "Sparse"))
fitted_curves <- fitted(fit)
colnames(fitted_curves) <- sprintf("t%02d", seq_along(fit$workGrid))
write.csv(data.frame(id = ids, fitted_curves), file.path(args[2], "Blackmore_default_fitted.csv"),
          row.names = FALSE)
write.csv(data.frame(t = fit$workGrid, mu = fit$mu), file.path(args[2], "Blackmore_default_mu.csv"),
          row.names = FALSE)
info <- sprintf('{"fdapace": "%s", "K": %d, "sigma2": %.17g, "bwMu": %.17g, "bwCov": %.17g}\n',
                packageVersion("fdapace"), fit$selectK, fit$sigma2, fit$bwMu, fit$bwCov)
cat(info, file = file.path(args[2], "Blackmore_default_info.json"))
